// See include/ppstage/train/auto_plan.h.
#include "ppstage/train/auto_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/device.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/compute_threads.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/text.h"
#include "ppstage/core/units.h"
#include "ppstage/measure/unit_costs.h"
#include "ppstage/parallel/tensor_parallel.h"
#include "ppstage/parallel/tp_group.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/shared_cores.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/train/job_setup.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// `fn` agreed over `world` (runAgreed), or run as it is in one process.
void agreed(Communicator* world, const std::function<void()>& fn) {
  if (world != nullptr) {
    runAgreed(*world, fn);
  } else {
    fn();
  }
}

void checkPlannable(const Config& config, int world) {
  PPSTAGE_CHECK(config.plan.ranks == 0 || config.plan.ranks == world,
                "--pipeline.auto plans for the job's ", world, " ranks; --plan.ranks is ",
                config.plan.ranks);
  PPSTAGE_CHECK(world % config.train.tp == 0, "--pipeline.auto plans pp x dp around --train.tp ",
                config.train.tp, ", which must divide the job's ", world, " ranks");
}

// This rank's tensor-parallel group for measuring sharded units: as in the run, ranks r
// and r' share one where r / tp == r' / tp (Topology::tensorParallelColor). Null at tp 1
// and in one process (whose units are measured whole). Collective over `world`.
std::unique_ptr<TpGroup> measuringGroup(int tp, Communicator* world) {
  if (tp <= 1 || world == nullptr || world->size() < 2) return nullptr;
  runAgreed(*world, [&] {
    PPSTAGE_CHECK(world->size() % tp == 0, "--train.tp ", tp, " must divide the ", world->size(),
                  " ranks that measure the model's costs");
  });
  auto group = std::make_unique<TpGroup>(world->rank() % tp, tp);
  group->attach(world->split(world->rank() / tp, world->rank() % tp));
  return group;
}

// The profile a job of `ranks` ranks plans with: read from --plan.costs, or measured on
// every rank of `world` (measuredProfile) and saved with --plan.save_costs. The
// same on every rank.
CostProfile agreedProfile(const Config& config, const CapturedRun& run, int ranks,
                          Communicator* world) {
  if (config.plan.costs.empty()) {
    CostProfile profile = measuredProfile(config, &run, ranks, world);
    const bool leader = world == nullptr || world->rank() == 0;
    if (leader && !config.plan.save_costs.empty()) {
      writeFileAtomically(config.plan.save_costs, costProfileToJson(profile));
    }
    return profile;
  }
  std::optional<CostProfile> profile;
  agreed(world, [&] {
    profile = readCostProfile(readFile(config.plan.costs, "cost profile"), config.plan.costs);
    PPSTAGE_CHECK(
        profile->batch_size == config.train.batch_size && profile->model == config.model.name,
        "cost profile '", config.plan.costs, "' was measured for --model.name '", profile->model,
        "' with a batch of ", profile->batch_size, "; this run has '", config.model.name, "' and ",
        config.train.batch_size);
    checkProfileTp(*profile, static_cast<int>(config.train.tp), config.plan.costs);
  });
  return *profile;
}

void logChoice(std::ostream& log, const Plan& plan, const CostProfile& profile, int hosts,
               double measure_s, double plan_s) {
  const PlanCandidate& c = plan.best.front();
  char line[512];
  std::snprintf(line, sizeof line,
                "pipeline.auto: %s, predicted step %.4f s (%.0f tokens/s, peak %.1f MB per "
                "rank, bubble %.3f): the fastest of %lld candidates (%lld simulated, %lld over "
                "the memory budget); measured in %.1f s, planned in %.2f s\n",
                c.label().c_str(), c.step_s, c.tokens_per_s, c.peak_bytes / kBytesPerMiB, c.bubble,
                static_cast<long long>(plan.candidates), static_cast<long long>(plan.simulated),
                static_cast<long long>(plan.over_budget), measure_s, plan_s);
  log << line;
  for (const std::string& reason : recomputeReasons(c, profile)) {
    log << "pipeline.auto: " << reason << "\n";
  }
  const std::string sharding = shardingReason(c, profile);
  if (!sharding.empty()) log << "pipeline.auto: " << sharding << "\n";
  if (hosts > 1) log << "pipeline.auto: " << hostsReason(c, profile) << "\n";
  if (plan.default_config.microbatches == 0) return;
  const PlanCandidate& d = plan.default_config;
  if (d.step_s >= c.step_s) {
    std::snprintf(line, sizeof line,
                  "pipeline.auto: the default (%s, balanced by %s) predicts %.4f s: %.2fx "
                  "slower\n",
                  d.label().c_str(), defaultBalanceOf(profile), d.step_s, d.step_s / c.step_s);
  } else {  // faster, but over the memory budget
    std::snprintf(line, sizeof line,
                  "pipeline.auto: the default (%s, balanced by %s) predicts %.4f s, but a peak "
                  "of %.1f MB per rank, over --plan.memory_mb\n",
                  d.label().c_str(), defaultBalanceOf(profile), d.step_s,
                  d.peak_bytes / kBytesPerMiB);
  }
  log << line;
}

// Where `profile`'s costs come from, for the log.
std::string costsText(const Config& config, const CostProfile& profile) {
  if (!config.plan.costs.empty()) return "read from --plan.costs '" + config.plan.costs + "'";
  return "measured in compile mode " + profile.compile_mode + ", " + profile.precision +
         ", links " + profile.links;
}

}  // namespace

namespace {

// Whether `config`'s ranks compute on GPUs (and where the device is refused: the run says
// why), whose cores nothing shares.
bool computesOffTheCpu(const Config& config) {
  try {
    return resolveDevice(config.train.device, config.comm.backend, thisHost()).cuda();
  } catch (const Error&) {
    return true;
  }
}

}  // namespace

CpuLayout jobCpuLayout(const Config& config, int world) {
  if (!mpiActive() || mpiWorldSize() != world || computesOffTheCpu(config)) return {};
  return mpiCpuLayout(computeThreads(config.train, world));
}

CostProfile measuredProfile(const Config& config, const CapturedRun* run, int ranks,
                            Communicator* world) {
  const bool alone = world == nullptr || world->size() < 2;
  const int threads = computeThreads(config.train, alone ? ranks : world->size());
  setComputeThreads(threads);
  const std::unique_ptr<TpGroup> group = measuringGroup(static_cast<int>(config.train.tp), world);
  // Ranks that outnumber their machine's cores measure in turns; the share of a core each
  // rank's threads had while measuring goes with the profile.
  const CpuLayout cpus = computesOffTheCpu(config) ? CpuLayout{}
                         : alone ? cpuLayoutOf({thisMachineId()}, {coresOfThisMachine()}, threads)
                                 : mpiCpuLayout(threads);
  const std::vector<int> turns = alone || cpus.empty()
                                     ? std::vector<int>{}
                                     : cpus.measuringTurns(static_cast<int>(config.train.tp));
  CostProfile profile = measureCostProfileOnRanks(
      [&] {
        std::optional<CapturedRun> captured;  // where the run passed none
        const CapturedRun& mine = run != nullptr ? *run : captured.emplace(captureRun(config));
        UnitSharding sharding;
        if (group) {
          sharding.tp = group->size();
          sharding.shard = [&](StageModule& unit) { shardStage(unit, mine.model.graph, *group); };
        }
        return measureCostProfile(config, mine.model, mine.loss, ranks, sharding);
      },
      world, mpiHostOfRanks(), mpiHostNames(), turns);
  profile.core_share = cpus.empty()    ? 0
                       : turns.empty() ? cpus.meanShare()
                                       : cpus.measuringShare(turns);
  return profile;
}

void planAutomatically(Config& config, const CapturedRun& run, Communicator& world,
                       std::ostream& log) {
  const Clock::time_point start = Clock::now();
  runAgreed(world, [&] { checkPlannable(config, world.size()); });
  const CostProfile profile = agreedProfile(config, run, world.size(), &world);
  const double measure_s = secondsSince(start);
  std::optional<Plan> plan;
  int hosts = 1;
  const Clock::time_point planning = Clock::now();
  runAgreed(world, [&] {
    const ScheduleRegistry registry = makeScheduleRegistry(config.pipeline.schedule_plugin);
    PlanRequest request = planRequestOf(
        config.plan, world.size(), static_cast<int>(config.train.tp), registry, mpiHostOfRanks());
    if (config.plan.hosts == 0) request.cpus = jobCpuLayout(config, world.size());
    request.keep = 1;
    plan = planPipeline(profile, request, registry);
    hosts = hostCountOf(request.host_of_rank);
  });
  const double plan_s = secondsSince(planning);
  applyCandidate(plan->best.front(), profile, config);
  if (world.rank() == 0) logChoice(log, *plan, profile, hosts, measure_s, plan_s);
}

std::optional<TimeCut> cutByTime(Config& config, const CapturedRun& run, int ranks,
                                 Communicator* world) {
  PlanCandidate job;  // checked before the costs are measured
  agreed(world, [&] { job = candidateOf(config, jobTopologyOnHosts(config, ranks)); });
  if (job.stages() == 1) return std::nullopt;
  TimeCut cut;
  const Clock::time_point start = Clock::now();
  const CostProfile profile = agreedProfile(config, run, ranks, world);
  job.shared_cores = sharedCoresOf(jobTopologyOnHosts(config, ranks), jobCpuLayout(config, ranks),
                                   profile.core_share);
  cut.measure_s = secondsSince(start);
  cut.costs = costsText(config, profile);
  agreed(world, [&] {
    const ScheduleRegistry registry = makeScheduleRegistry(config.pipeline.schedule_plugin);
    cut.chosen = cutFor(profile, job, registry, config.plan.memory_mb * kBytesPerMiB);
    if (job.stages() > 1) job.stage_starts = paramsCut(profile, job.stages());
    const PlanCandidate by_params = predictCandidate(profile, job, registry);
    cut.params_step_s = by_params.step_s;
    if (by_params.step_s < cut.chosen.step_s) cut.chosen = by_params;
  });
  cut.split_points = splitPointsOf(cut.chosen, profile);
  config.pipeline.split_points = cut.split_points;
  return cut;
}

std::string timeCutText(const TimeCut& cut) {
  char figures[160];
  std::snprintf(figures, sizeof figures,
                "predicted step %.4f s (balanced by params: %.4f s); costs in %.1f s, ",
                cut.chosen.step_s, cut.params_step_s, cut.measure_s);
  const std::string points =
      cut.split_points.empty() ? "nothing to cut" : joinText(cut.split_points, ",");
  return "pipeline.balance time: " + cut.chosen.label() + " cut at " + points + ", " + figures +
         cut.costs;
}

}  // namespace ppstage
