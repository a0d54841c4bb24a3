// The planner over several hosts (Note [Links in the plan], plan/planner.h) on cost profiles
// written here: a slow link between hosts puts the data-parallel all-reduces inside hosts
// and the pipeline between them (rank order pp-dp-tp by slot); each order's tail and
// messages cost the formula's link; without links between hosts measured the two orders
// predict alike; --plan.hosts lays ranks out as mpirun fills hosts; and the order reaches
// the config file train reads, and back.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "ppstage/core/cpu_layout.h"
#include "ppstage/core/topology.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/planner.h"
#include "ppstage/plan/shared_cores.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "support/plan_profiles.h"

namespace ppstage {
namespace {

constexpr int64_t kElements = 1000000;  // trainable per unit: 4 MB of fp32 gradients

// 8 blocks (per sample F 1 ms, B 2 ms, 4 KB sent on), AdamW, links inside a host of 5 us
// and 5 GB/s (all-reduces 1 GB/s) and, with `between`, between hosts of 1 ms and 25 MB/s
// (200 Mbit/s) for messages and all-reduces alike.
CostProfile profileOf(bool between) {
  CostProfile p = test::emptyProfile("hosts", 16, 1e-9, 12, 8);
  for (int u = 0; u < 8; ++u) {
    p.units.push_back(test::blockUnit(u, 4 * kElements, kElements, {0.1e6, 0.1e6}, {0.1e6, 0.1e6}));
  }
  if (between) {
    p.host_link_latency_s = 1e-3;
    p.host_link_bytes_per_s = 25e6;
    p.host_allreduce_latency_s = 1e-3;
    p.host_allreduce_bytes_per_s = 25e6;
  }
  return p;
}

// 4 ranks on 2 hosts, as mpirun fills them by slot.
PlanRequest twoHosts() {
  PlanRequest r;
  r.ranks = 4;
  r.schedules = {"1f1b"};
  r.keep = 100000;
  r.host_of_rank = {0, 0, 1, 1};
  return r;
}

// 1F1B at pp 2 x dp 2, M 4, cut in half, in `order` on twoHosts(), predicted.
PlanCandidate pp2dp2(const CostProfile& profile, RankOrder order,
                     const ScheduleRegistry& registry) {
  PlanCandidate c = test::oneFOneB(2, 2, 4, 2, {4});
  c.rank_order = order;
  c.across_hosts = hostCrossings(
      Topology::forJob(4, 2, 2, 1, Placement::kLoop, 1, order).withHosts(twoHosts().host_of_rank));
  return predictCandidate(profile, c, registry);
}

// Per rank 4 units: 16 MB of gradients. Between hosts their all-reduce takes 1 ms + 16 MB /
// 25 MB/s; inside one 5 us + 16 MB / 1 GB/s. The pipeline's message of 2 x 4 KB takes 1 ms
// + 8 KB / 25 MB/s between hosts: pp-dp-tp's makespan grows by at most its messages.
TEST(PlannerLinks, EachOrderPaysItsLinkByTheFormula) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = profileOf(true);
  const PlanCandidate replica_major = pp2dp2(profile, RankOrder::kReplicaMajor, registry);
  const PlanCandidate pipeline_major = pp2dp2(profile, RankOrder::kPipelineMajor, registry);
  EXPECT_TRUE(replica_major.across_hosts.data_parallel);
  EXPECT_TRUE(replica_major.across_hosts.boundaries.empty());
  EXPECT_FALSE(pipeline_major.across_hosts.data_parallel);
  EXPECT_EQ(pipeline_major.across_hosts.boundaries, std::vector<int>{0});
  const double gradients = 4.0 * 4 * kElements;
  EXPECT_NEAR(replica_major.tail_s - pipeline_major.tail_s,
              (1e-3 + gradients / 25e6) - (5e-6 + gradients / 1e9), 1e-12);
  const double between = 1e-3 + 2 * 4096 / 25e6, inside = 5e-6 + 2 * 4096 / 5e9;
  EXPECT_GT(pipeline_major.makespan_s, replica_major.makespan_s);
  // 1F1B's critical path crosses the boundary twice per micro-batch at most.
  EXPECT_LE(pipeline_major.makespan_s - replica_major.makespan_s, 2 * 4 * (between - inside));
  EXPECT_LT(pipeline_major.step_s, replica_major.step_s);
}

// A weight tied between the first and last units (gpt's embedding and LM head), 1 MB of
// gradient: at pp 2 both pipeline ranks sum it after the data-parallel all-reduce, between
// the hosts in pp-dp-tp (1 ms + 1 MB / 25 MB/s), inside them in dp-pp-tp (5 us + 1 MB / 1
// GB/s); on one pipeline rank, or where a V puts both units on rank 0, nothing crosses.
TEST(PlannerLinks, TiedWeightsOnTwoPipelineRanksPayTheirSum) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile plain = profileOf(true);
  CostProfile tied = plain;
  tied.ties.push_back({{0, 7}, 1000000});
  for (const RankOrder order : {RankOrder::kPipelineMajor, RankOrder::kReplicaMajor}) {
    const double sum = order == RankOrder::kPipelineMajor ? 1e-3 + 1e6 / 25e6 : 5e-6 + 1e6 / 1e9;
    EXPECT_NEAR(pp2dp2(tied, order, registry).tail_s - pp2dp2(plain, order, registry).tail_s, sum,
                1e-12);
  }
  PlanCandidate one = test::oneFOneB(4, 1, 4, 1, {});
  EXPECT_DOUBLE_EQ(predictCandidate(tied, one, registry).step_s,
                   predictCandidate(plain, one, registry).step_s);
  PlanCandidate v = test::oneFOneB(1, 2, 4, 4, {2, 4, 6});
  v.schedule = "zb-v";
  v.stages_per_rank = 2;
  v.placement = Placement::kV;
  EXPECT_DOUBLE_EQ(predictCandidate(tied, v, registry).step_s,
                   predictCandidate(plain, v, registry).step_s);
  // The profile keeps its ties; one naming a unit it lacks is refused.
  const CostProfile back = readCostProfile(costProfileToJson(tied), "test");
  ASSERT_EQ(back.ties.size(), 1u);
  EXPECT_EQ(back.ties[0].units, (std::vector<size_t>{0, 7}));
  EXPECT_EQ(back.ties[0].gradient_bytes, 1000000);
  nlohmann::json json = nlohmann::json::parse(costProfileToJson(tied));
  json["ties"][0]["units"][1] = 8;
  EXPECT_THROW(readCostProfile(json.dump(), "bad"), Error);
  json.erase("ties");
  EXPECT_TRUE(readCostProfile(json.dump(), "old").ties.empty());
}

// The plan over the slow link: the chosen layout keeps its all-reduces inside the hosts, and
// the plan lists pp 2 x dp 2 in pp-dp-tp before dp-pp-tp.
TEST(PlannerLinks, ASlowLinkBetweenHostsKeepsTheAllReducesInside) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const Plan plan = planPipeline(profileOf(true), twoHosts(), registry);
  const PlanCandidate& chosen = plan.best.front();
  EXPECT_FALSE(chosen.across_hosts.data_parallel) << chosen.label();
  int pipeline_major = -1, replica_major = -1;
  for (size_t i = 0; i < plan.best.size(); ++i) {
    const PlanCandidate& c = plan.best[i];
    if (c.dp != 2 || c.pp != 2 || c.stages_per_rank != 1) continue;
    int& first = c.rank_order == RankOrder::kPipelineMajor ? pipeline_major : replica_major;
    if (first < 0) first = static_cast<int>(i);
  }
  ASSERT_GE(pipeline_major, 0);
  ASSERT_GE(replica_major, 0);
  EXPECT_LT(pipeline_major, replica_major);
  EXPECT_NE(plan.best[static_cast<size_t>(pipeline_major)].label().find("pp-dp-tp"),
            std::string::npos);
}

// A profile measured on one host has no links between hosts: both orders cost the links
// inside, and predict the same step.
TEST(PlannerLinks, WithoutLinksBetweenHostsBothOrdersPredictAlike) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = profileOf(false);
  EXPECT_FALSE(profile.hasHostLinks());
  EXPECT_DOUBLE_EQ(pp2dp2(profile, RankOrder::kReplicaMajor, registry).step_s,
                   pp2dp2(profile, RankOrder::kPipelineMajor, registry).step_s);
}

// One host, or none given: one order, and nothing crosses.
TEST(PlannerLinks, OneHostTriesOneOrder) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  PlanRequest request = twoHosts();
  request.host_of_rank.clear();
  for (const PlanCandidate& c : planPipeline(profileOf(true), request, registry).best) {
    EXPECT_EQ(c.rank_order, RankOrder::kReplicaMajor);
    EXPECT_TRUE(c.across_hosts.boundaries.empty());
    EXPECT_FALSE(c.across_hosts.data_parallel);
  }
}

// --plan.hosts N: ranks / N adjacent ranks per host, or the job's hosts where it gives none.
TEST(PlannerLinks, PlanHostsFillsEachHostWithAdjacentRanks) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  PlanConfig plan;
  plan.hosts = 2;
  EXPECT_EQ(planRequestOf(plan, 4, 1, registry).host_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(planRequestOf(plan, 8, 2, registry).host_of_rank,
            (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  plan.hosts = 3;
  EXPECT_THROW(planRequestOf(plan, 4, 1, registry), Error);
  plan.hosts = 0;
  EXPECT_EQ(planRequestOf(plan, 4, 1, registry, {0, 1, 0, 1}).host_of_rank,
            (std::vector<int>{0, 1, 0, 1}));
  EXPECT_TRUE(planRequestOf(plan, 4, 1, registry, {0, 0, 0, 0}).host_of_rank.empty());
  EXPECT_TRUE(planRequestOf(plan, 4, 1, registry, {0, 1}).host_of_rank.empty());  // another job
}

// The chosen order in the config file, read back by train and by candidateOf.
TEST(PlannerLinks, TheRankOrderReachesTheConfigFileAndBack) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = profileOf(true);
  const PlanCandidate c = pp2dp2(profile, RankOrder::kPipelineMajor, registry);
  const std::string path = ::testing::TempDir() + "planner_links.ini";
  {
    std::ofstream file(path);
    file << configIniOf({{"pipeline.rank_order", "dp-pp-tp"}}, c, profile, "a plan");
  }
  const Config read = test::readConfigFile(path);
  EXPECT_EQ(read.pipeline.rank_order, RankOrder::kPipelineMajor);
  const Topology job = Topology::forJob(4, 2, 2, 1, Placement::kLoop, 1, read.pipeline.rank_order)
                           .withHosts({0, 0, 1, 1});
  const PlanCandidate back = candidateOf(read, job);
  EXPECT_EQ(back.rank_order, RankOrder::kPipelineMajor);
  EXPECT_EQ(back.across_hosts.boundaries, std::vector<int>{0});
  Config applied = read;
  applied.pipeline.rank_order = RankOrder::kReplicaMajor;
  applyCandidate(c, profile, applied);
  EXPECT_EQ(applied.pipeline.rank_order, RankOrder::kPipelineMajor);
}

// The profile's links between hosts and the pairs probed survive its JSON; a profile
// written before them reads as measured on one host, its step's all-reduce not measured.
TEST(PlannerLinks, ProfilesKeepTheirLinksBetweenHosts) {
  CostProfile profile = profileOf(true);
  profile.probed_links.push_back({0, 2, "h0", "h1", 1e-3, 25e6});
  const CostProfile back = readCostProfile(costProfileToJson(profile), "test");
  EXPECT_DOUBLE_EQ(back.host_link_latency_s, 1e-3);
  EXPECT_DOUBLE_EQ(back.host_allreduce_bytes_per_s, 25e6);
  ASSERT_EQ(back.probed_links.size(), 1u);
  EXPECT_EQ(back.probed_links[0].second_host, "h1");
  EXPECT_EQ(back.probed_links[0].second_rank, 2);
  EXPECT_DOUBLE_EQ(back.messageSeconds(25e6, true), 1e-3 + 1.0);
  EXPECT_DOUBLE_EQ(back.messageSeconds(5e9, false), 5e-6 + 1.0);
  // Before them: no host_* keys and no probed_links.
  nlohmann::json json = nlohmann::json::parse(costProfileToJson(profile));
  for (const char* key :
       {"host_link_latency_s", "host_link_bytes_per_s", "host_allreduce_latency_s",
        "host_allreduce_bytes_per_s", "probed_links", "step_reduce_s", "step_reduce_ranks"}) {
    json.erase(key);
  }
  const std::string old = json.dump();
  const CostProfile before = readCostProfile(old, "old");
  EXPECT_FALSE(before.hasHostLinks());
  EXPECT_TRUE(before.probed_links.empty());
  EXPECT_EQ(before.step_reduce_ranks, 0);
  EXPECT_DOUBLE_EQ(before.messageSeconds(25e6, true), before.messageSeconds(25e6, false));
}

// The step's all-reduce of losses and norms joins every rank before the optimizers: the
// probe's measure of it where the probe ran over the plan's ranks, else the all-reduce
// line's (3 ring latencies of 2 ranks over 4, between the hosts the job spans). It
// survives the profile's JSON.
TEST(PlannerLinks, TheStepsJoinIsTheProbedOneOverAsManyRanks) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile line = profileOf(true);
  CostProfile probed = line;
  probed.step_reduce_s = 0.25;
  probed.step_reduce_ranks = 4;
  const double by_line = 3 * 1e-3 + 2.0 * 3 / 4 * 8 * (14 + 6 * 4) / 25e6;
  for (const RankOrder order : {RankOrder::kPipelineMajor, RankOrder::kReplicaMajor}) {
    EXPECT_NEAR(pp2dp2(probed, order, registry).tail_s - pp2dp2(line, order, registry).tail_s,
                0.25 - by_line, 1e-12);
  }
  probed.step_reduce_ranks = 8;  // another job's
  EXPECT_DOUBLE_EQ(pp2dp2(probed, RankOrder::kPipelineMajor, registry).tail_s,
                   pp2dp2(line, RankOrder::kPipelineMajor, registry).tail_s);
  const CostProfile back = readCostProfile(costProfileToJson(probed), "test");
  EXPECT_DOUBLE_EQ(back.step_reduce_s, 0.25);
  EXPECT_EQ(back.step_reduce_ranks, 8);
}

// Machines are numbered by their first rank; a thread's share is its machine's cores over
// the threads of its ranks, at most 1.
TEST(SharedCores, CpuLayoutNumbersMachinesAndSharesTheirCores) {
  const CpuLayout cpus = cpuLayoutOf({"b", "b", "a", "a", "a"}, {2, 2, 8, 8, 8}, 2);
  EXPECT_EQ(cpus.machine_of_rank, (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(cpus.cores, (std::vector<int>{2, 8}));
  EXPECT_DOUBLE_EQ(cpus.shareOf(0), 0.5);  // 4 threads on 2 cores
  EXPECT_DOUBLE_EQ(cpus.shareOf(4), 1.0);  // 6 threads on 8 cores
  EXPECT_DOUBLE_EQ(cpus.meanShare(), (2 * 0.5 + 3 * 1.0) / 5);
  EXPECT_DOUBLE_EQ(CpuLayout{}.meanShare(), 1.0);
  EXPECT_FALSE(thisMachineId().empty());
  EXPECT_GE(coresOfThisMachine(), 1);
}

// Ranks measure the costs in turns that give each thread a core of its machine: 4 ranks of
// one thread on 2 cores take 2 turns of 2, with a share of 1; a machine with cores enough
// measures in one turn; tensor-parallel pairs keep together, one pair a turn where a pair
// fills the cores; a group wider than the cores still measures, alone, at the share it has.
TEST(SharedCores, RanksMeasureInTurnsOfACorePerThread) {
  const CpuLayout one = cpuLayoutOf({"m", "m", "m", "m"}, {2, 2, 2, 2}, 1);
  EXPECT_EQ(one.measuringTurns(1), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_DOUBLE_EQ(one.measuringShare(one.measuringTurns(1)), 1.0);
  EXPECT_DOUBLE_EQ(one.measuringShare({0, 0, 0, 0}), 0.5);  // all at once
  EXPECT_EQ(one.measuringTurns(2), (std::vector<int>{0, 0, 1, 1}));
  const CpuLayout two = cpuLayoutOf({"a", "a", "b", "b", "b"}, {2, 2, 1, 1, 1}, 1);
  EXPECT_EQ(two.measuringTurns(1), (std::vector<int>{0, 0, 0, 1, 2}));
  EXPECT_DOUBLE_EQ(two.measuringShare(two.measuringTurns(1)), 1.0);
  const CpuLayout roomy = cpuLayoutOf({"m", "m", "m", "m"}, {8, 8, 8, 8}, 2);
  EXPECT_EQ(roomy.measuringTurns(1), (std::vector<int>{0, 0, 0, 0}));
  const CpuLayout narrow = cpuLayoutOf({"m", "m", "m", "m"}, {1, 1, 1, 1}, 1);
  EXPECT_EQ(narrow.measuringTurns(2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_DOUBLE_EQ(narrow.measuringShare(narrow.measuringTurns(2)), 0.5);
  EXPECT_THROW(narrow.measuringShare({0}), Error);
}

// pp 2 x dp 2 on 4 ranks: each pipeline rank's threads land on the machines its world
// ranks run on, in either rank order; where every machine has a core per thread, now and
// when measured, nothing is shared.
TEST(SharedCores, EachPipelineRankCountsItsThreadsOnEachMachine) {
  const auto job = [](RankOrder order) {
    return Topology::forJob(4, 2, 2, 1, Placement::kLoop, 1, order);
  };
  const CpuLayout one_machine = cpuLayoutOf({"m", "m", "m", "m"}, {2, 2, 2, 2}, 1);
  SharedCores shared = sharedCoresOf(job(RankOrder::kReplicaMajor), one_machine, 0.5);
  EXPECT_EQ(shared.cores, (std::vector<double>{2}));
  EXPECT_EQ(shared.threads, (std::vector<std::vector<double>>{{2, 2}}));
  EXPECT_DOUBLE_EQ(shared.measured_share, 0.5);
  // Two machines of one core each (network namespaces would be two hosts of one machine).
  const CpuLayout two = cpuLayoutOf({"a", "a", "b", "b"}, {1, 1, 1, 1}, 1);
  EXPECT_EQ(sharedCoresOf(job(RankOrder::kPipelineMajor), two, 0.5).threads,
            (std::vector<std::vector<double>>{{2, 0}, {0, 2}}));
  EXPECT_EQ(sharedCoresOf(job(RankOrder::kReplicaMajor), two, 0.5).threads,
            (std::vector<std::vector<double>>{{1, 1}, {1, 1}}));
  // Cores enough: empty; a share not known, or machines of another job: empty.
  const CpuLayout roomy = cpuLayoutOf({"a", "a", "b", "b"}, {2, 2, 2, 2}, 1);
  EXPECT_TRUE(sharedCoresOf(job(RankOrder::kPipelineMajor), roomy, 1.0).empty());
  EXPECT_FALSE(sharedCoresOf(job(RankOrder::kPipelineMajor), roomy, 0.5).empty());
  EXPECT_TRUE(sharedCoresOf(job(RankOrder::kPipelineMajor), two, 0).empty());
  EXPECT_TRUE(sharedCoresOf(job(RankOrder::kPipelineMajor), CpuLayout{}, 0.5).empty());
  EXPECT_TRUE(sharedCoresOf(Topology::forJob(2, 1, 2, 1), cpuLayoutOf({"m"}, {1}, 1), 0.5).empty());
}

// A plan for 4 ranks on one machine of 2 cores, costs measured at half a core a thread:
// each candidate is simulated with its ranks sharing the cores, so pp 2 x dp 2 predicts a
// shorter step than on cores of its own (its warm-up and drain, and the last stage's
// gradient sums beside the first stage's last backward, run at twice the speed), but not below
// half of it (the speed a whole core gives).
TEST(SharedCores, ThePlannerSimulatesCandidatesOnTheJobsCores) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  CostProfile profile = profileOf(false);
  profile.core_share = 0.5;
  PlanCandidate c = test::oneFOneB(2, 2, 4, 2, {4});
  const PlanCandidate own = predictCandidate(profile, c, registry);
  c.shared_cores = sharedCoresOf(Topology::forJob(4, 2, 2, 1),
                                 cpuLayoutOf({"m", "m", "m", "m"}, {2, 2, 2, 2}, 1), 0.5);
  const PlanCandidate shared = predictCandidate(profile, c, registry);
  EXPECT_LT(shared.makespan_s, own.makespan_s);
  EXPECT_GT(shared.makespan_s, own.makespan_s / 2);
  EXPECT_LT(shared.step_s, own.step_s);
  EXPECT_GT(shared.step_s, own.step_s / 2);
  EXPECT_DOUBLE_EQ(shared.makespan_s + shared.tail_s, shared.step_s);
  EXPECT_GT(shared.tail_s, 0);
  // Through a request: the plan's pp 2 x dp 2 M4 predicts what that candidate predicts on
  // the shared cores, not on cores of its own.
  PlanRequest request;
  request.ranks = 4;
  request.schedules = {"1f1b"};
  request.keep = 100000;
  request.cpus = cpuLayoutOf({"m", "m", "m", "m"}, {2, 2, 2, 2}, 1);
  bool found = false;
  for (const PlanCandidate& p : planPipeline(profile, request, registry).best) {
    if (p.dp != 2 || p.pp != 2 || p.stages_per_rank != 1 || p.microbatches != 4) continue;
    EXPECT_FALSE(p.shared_cores.empty());
    PlanCandidate again = p;
    EXPECT_DOUBLE_EQ(predictCandidate(profile, again, registry).step_s, p.step_s);
    again.shared_cores = {};
    EXPECT_GT(predictCandidate(profile, again, registry).step_s, p.step_s);
    found = true;
  }
  EXPECT_TRUE(found);
}

// core_share survives the profile's JSON; one written before it reads as not known (0),
// and one outside [0, 1] is refused.
TEST(SharedCores, ProfilesKeepTheirCoreShare) {
  CostProfile profile = profileOf(false);
  profile.core_share = 0.5;
  EXPECT_DOUBLE_EQ(readCostProfile(costProfileToJson(profile), "test").core_share, 0.5);
  nlohmann::json json = nlohmann::json::parse(costProfileToJson(profile));
  json.erase("core_share");
  EXPECT_DOUBLE_EQ(readCostProfile(json.dump(), "old").core_share, 0.0);
  json["core_share"] = 1.5;
  EXPECT_THROW(readCostProfile(json.dump(), "bad"), Error);
}

}  // namespace
}  // namespace ppstage
