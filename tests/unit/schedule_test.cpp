// Schedules against their formulas (simulated with the validator), the CSV form, the
// plugin API and the errors. Needs no LibTorch: links ppstage_core only.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <numeric>
#include <utility>

#include "ppstage/schedule/early_receives.h"
#include "ppstage/schedule/lowering.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/schedule/plugin_loader.h"
#include "ppstage/schedule/schedule_csv.h"
#include "support/error_of.h"

namespace ppstage {
namespace {

const ScheduleRegistry& registry() {
  static const ScheduleRegistry r = makeScheduleRegistry();
  return r;
}

PipelineSchedule build(const std::string& name, int stages, int microbatches,
                       int stages_per_rank = 1, ActionCosts costs = {}) {
  ScheduleOptions o;
  o.schedule = name;
  o.stages = stages;
  o.microbatches = microbatches;
  o.stages_per_rank = stages_per_rank;
  o.costs = costs;
  return buildSchedule(registry(), o);
}

double totalIdle(const SimulationResult& r) {
  return std::accumulate(r.idle.begin(), r.idle.end(), 0.0);
}

using test::errorOf;

std::vector<std::string> strings(const ActionList& list) {
  std::vector<std::string> out;
  for (const Action& a : list) out.push_back(toString(a));
  return out;
}

TEST(Schedules, GpipeAnd1f1bBubbleIsExactlyTheFormula) {
  for (int S = 2; S <= 8; ++S) {
    for (int M = S; M <= 4 * S; ++M) {
      const double formula = static_cast<double>(S - 1) / (M + S - 1);
      const auto gpipe = build("gpipe", S, M);
      const auto one = build("1f1b", S, M);
      EXPECT_NEAR(gpipe.simulation.bubble_fraction, formula, 1e-12)
          << "gpipe S=" << S << " M=" << M;
      EXPECT_NEAR(one.simulation.bubble_fraction, formula, 1e-12) << "1f1b S=" << S << " M=" << M;
      for (int s = 0; s < S; ++s) {
        EXPECT_EQ(one.simulation.peak_inflight[s], std::min(M, S - s)) << "S=" << S << " M=" << M;
        EXPECT_EQ(gpipe.simulation.peak_inflight[s], M);
      }
    }
  }
}

TEST(Schedules, InterleavedBubbleIsDividedByTheStagesPerRank) {
  for (int P = 2; P <= 4; ++P) {
    for (int V = 2; V <= 4; ++V) {
      for (int M = P; M <= 4 * P; M += P) {
        const ActionCosts costs;  // F=1, B=2
        const auto s = build("interleaved-1f1b", P * V, M, V, costs);
        const double ideal = V * M * (costs.forward + costs.backward);
        for (size_t r = 0; r < s.simulation.idle.size(); ++r) {
          EXPECT_NEAR(s.simulation.idle[r] / ideal, static_cast<double>(P - 1) / (V * M), 1e-12)
              << "P=" << P << " V=" << V << " M=" << M << " rank " << r;
        }
      }
    }
  }
}

TEST(Schedules, ZeroBubbleH1CutsTheBubbleToAThirdWithoutMoreMemory) {
  ActionCosts costs;  // F = I = W = 1 (B = I + W = 2 for 1F1B)
  for (int S = 2; S <= 8; ++S) {
    for (int M = S; M <= 4 * S; ++M) {
      const auto zb = build("zb-h1", S, M, 1, costs).simulation;
      const auto one = build("1f1b", S, M, 1, costs).simulation;
      EXPECT_LE(totalIdle(zb), 0.4 * totalIdle(one)) << "S=" << S << " M=" << M;
      EXPECT_LE(*std::max_element(zb.peak_inflight.begin(), zb.peak_inflight.end()),
                *std::max_element(one.peak_inflight.begin(), one.peak_inflight.end()));
    }
  }
}

// zb-v on P ranks (two stages each, in a V) with M micro-batches.
ScheduleOptions zbV(int P, int M) {
  ScheduleOptions o;
  o.schedule = "zb-v";
  o.stages = 2 * P;
  o.microbatches = M;
  o.stages_per_rank = 2;
  o.placement = Placement::kV;
  return o;
}

// ZB-V (Note [ZB-V order]): with F = I = W, under half the bubble of interleaved 1F1B on
// the same ranks and stages, with 2P micro-batches at most alive on the first stage.
TEST(Schedules, ZeroBubbleVLeavesLessThanHalfOfInterleavedsBubble) {
  const ActionCosts costs;  // F = I = W = 1, B = 2
  for (int P = 2; P <= 4; ++P) {
    for (int M = 2 * P; M <= 4 * P; M += P) {
      const auto v = buildSchedule(registry(), zbV(P, M)).simulation;
      const auto interleaved = build("interleaved-1f1b", 2 * P, M, 2, costs).simulation;
      EXPECT_LT(v.bubble_fraction, 0.5 * interleaved.bubble_fraction) << "P=" << P << " M=" << M;
      EXPECT_LE(v.peak_inflight[0], 2 * P) << "P=" << P << " M=" << M;
    }
  }
  // Any micro-batch count schedules (fewer than 2P - 1 as if padded) on any rank count,
  // and the layout is checked.
  for (int P = 1; P <= 3; ++P) {
    for (int M = 1; M <= 3; ++M) {
      EXPECT_NO_THROW(buildSchedule(registry(), zbV(P, M))) << "P=" << P << " M=" << M;
    }
  }
  EXPECT_NE(errorOf([] { build("zb-v", 4, 4, 2); }).find("--pipeline.placement v"),
            std::string::npos);
}

// Measured per-stage costs (ActionCosts::per_stage, what train's prediction uses): equal
// ones give the uniform makespan; a bottleneck last stage of 1F1B on 2 stages gives
// F0 + M (F1 + B1) + B0, the last stage busy from its first forward to its last backward.
TEST(Schedules, PerStageCostsGiveTheBottleneckFormula) {
  for (int M = 2; M <= 8; ++M) {
    ActionCosts uniform;
    ActionCosts same = uniform;
    same.per_stage = {{1, 2, 1, 1}, {1, 2, 1, 1}};
    ScheduleOptions o;
    o.schedule = "1f1b";
    o.stages = 2;
    o.microbatches = M;
    const PipelineSchedule s = buildSchedule(registry(), o);
    EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, same).makespan,
                     simulateSchedule(s.request, s.ranks, uniform).makespan);
    ActionCosts slow_last = uniform;
    slow_last.per_stage = {{1, 2, 0, 0}, {3, 5, 0, 0}};
    EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, slow_last).makespan, 1 + M * (3 + 5) + 2)
        << "M=" << M;
  }
}

// Tensor-parallel all-reduces (ActionCosts::tp_forward, tp_backward) lengthen every F and
// B (and I, not W): 1F1B on S stages takes (M + S - 1)(F + tf + B + tb); ZB-H1's W stays.
TEST(Schedules, TensorParallelCostsLengthenForwardAndBackward) {
  for (int M = 2; M <= 6; ++M) {
    ScheduleOptions o;
    o.schedule = "1f1b";
    o.stages = 3;
    o.microbatches = M;
    const PipelineSchedule s = buildSchedule(registry(), o);
    ActionCosts costs;
    costs.parseTensorParallel("0.25,0.5");
    EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan,
                     (M + 2) * (1 + 0.25 + 2 + 0.5))
        << "M=" << M;
    EXPECT_DOUBLE_EQ(costs.of(ActionKind::kBackwardInput, 0), 1.5);
    EXPECT_DOUBLE_EQ(costs.of(ActionKind::kBackwardWeight, 0), 1);
  }
  ActionCosts costs;
  EXPECT_THROW(costs.parseTensorParallel("1"), Error);
  EXPECT_THROW(costs.parseTensorParallel("1,-2"), Error);
}

// Micro-batches of different lengths (ActionCosts::microbatch_scale, message_scale): scales
// of 1 change nothing; with the bottleneck last stage above, each micro-batch adds its own
// F1 + B1, and the ends are the first micro-batch's F0 and message and the last one's
// message and B0.
TEST(Schedules, MicroBatchScalesGiveTheBottleneckFormulaPerMicroBatch) {
  for (int M = 2; M <= 8; ++M) {
    ScheduleOptions o;
    o.schedule = "1f1b";
    o.stages = 2;
    o.microbatches = M;
    const PipelineSchedule s = buildSchedule(registry(), o);
    ActionCosts slow_last;
    slow_last.per_stage = {{1, 2, 0, 0}, {3, 5, 0, 0}};
    slow_last.comm = 0.25;
    const double unscaled = simulateSchedule(s.request, s.ranks, slow_last).makespan;
    slow_last.microbatch_scale.assign(M, 1.0);
    slow_last.message_scale.assign(M, 1.0);
    EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, slow_last).makespan, unscaled);
    double expected = 0;
    for (int m = 0; m < M; ++m) {
      slow_last.microbatch_scale[m] = 1 + 0.25 * (m % 3);  // 1, 1.25, 1.5, 1, ...
      slow_last.message_scale[m] = 0.5 * slow_last.microbatch_scale[m];
      expected += slow_last.microbatch_scale[m] * (3 + 5);
    }
    const double first = slow_last.microbatch_scale.front(),
                 last = slow_last.microbatch_scale.back();
    expected += first * (1 + 0.5 * 0.25) + last * (2 + 0.5 * 0.25);
    EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, slow_last).makespan, expected)
        << "M=" << M;
  }
}

// Messages per boundary (ActionCosts::boundary_comm, a boundary between hosts costing
// more): one micro-batch of GPipe goes F0, F1, F2 forward and B2, B1, B0 back. F1 starts
// after F0 and boundary 0's message, F2 after F1 and boundary 1's; B1 after B2 and boundary
// 1's, B0 after B1 and boundary 0's.
TEST(Schedules, EachBoundaryCostsItsOwnCommEachWay) {
  ScheduleOptions o;
  o.schedule = "gpipe";
  o.stages = 3;
  o.microbatches = 1;
  const PipelineSchedule s = buildSchedule(registry(), o);
  ActionCosts costs;  // F 1, B 2
  costs.comm = 100;   // boundary_comm replaces it
  costs.boundary_comm = {0.25, 0.5};
  const SimulationResult result = simulateSchedule(s.request, s.ranks, costs);
  const auto start = [&](int rank, ActionKind kind) {
    const ActionList& actions = s.ranks.at(static_cast<size_t>(rank));
    for (size_t i = 0; i < actions.size(); ++i) {
      if (actions[i].kind == kind) return result.start.at(static_cast<size_t>(rank)).at(i);
    }
    ADD_FAILURE() << "no such action on rank " << rank;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(start(1, ActionKind::kForward), 1 + 0.25);
  EXPECT_DOUBLE_EQ(start(2, ActionKind::kForward), 2 + 0.25 + 0.5);
  EXPECT_DOUBLE_EQ(start(1, ActionKind::kBackward), 3 + 0.25 + 0.5 + 2 + 0.5);
  EXPECT_DOUBLE_EQ(start(0, ActionKind::kBackward), 3 + 2 * (0.25 + 0.5) + 4);
  EXPECT_DOUBLE_EQ(result.makespan, 3 * (1 + 2) + 2 * (0.25 + 0.5));
  costs.boundary_comm.clear();
  costs.comm = 0.25;
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan, 3 * (1 + 2) + 4 * 0.25);
}

TEST(Schedules, CsvRoundTripIsIdentity) {
  for (const auto& [name, stages, per_rank] : {std::tuple<std::string, int, int>{"gpipe", 4, 1},
                                               {"1f1b", 5, 1},
                                               {"interleaved-1f1b", 6, 2},
                                               {"zb-h1", 3, 1}}) {
    const auto s = build(name, stages, 6, per_rank);
    const std::string csv = scheduleToCsv(s.ranks, "round trip");
    EXPECT_EQ(scheduleFromCsv(csv, "test.csv"), s.ranks) << name;
    // A table runs as the named schedule did.
    const auto again = scheduleFromTable(csv, "test.csv", ScheduleOptions{});
    EXPECT_EQ(again.ranks, s.ranks);
    EXPECT_DOUBLE_EQ(again.simulation.makespan, s.simulation.makespan);
  }
}

TEST(Schedules, LoweringAddsTransfersOnlyBetweenRanks) {
  const auto s = build("1f1b", 2, 1);
  EXPECT_EQ(strings(s.ranks[0]), (std::vector<std::string>{"0F0", "0SEND_F0", "0RECV_B0", "0B0"}));
  EXPECT_EQ(strings(s.ranks[1]), (std::vector<std::string>{"1RECV_F0", "1F0", "1B0", "1SEND_B0"}));
  // Interleaved, 1 rank: every stage on rank 0, no transfers at all.
  const auto single = build("interleaved-1f1b", 2, 2, 2);
  for (const Action& a : single.ranks[0]) EXPECT_TRUE(a.isCompute()) << toString(a);
}

ActionList filtered(const ActionList& list, bool (*keep)(const Action&)) {
  ActionList out;
  std::copy_if(list.begin(), list.end(), std::back_inserter(out), keep);
  return out;
}
bool isReceive(const Action& a) { return a.isReceive(); }
bool isNotReceive(const Action& a) { return !a.isReceive(); }
bool isCommunication(const Action& a) { return !a.isCompute(); }

// Receives posted ahead (early_receives.h): on every built-in schedule the RECVs only move
// earlier, keep their order, and some move; the activations' pools stay within the
// simulator's peak in-flight count of their stage plus one, the gradients' within the
// lowered list's peak plus one, and the schedule still validates; with communication
// order kept (NCCL) no RECV passes a SEND.
TEST(EarlyReceives, RecvsMoveAheadWithinTheirBuffersAndTheScheduleStillHolds) {
  std::vector<PipelineSchedule> schedules = {
      build("gpipe", 2, 8), build("1f1b", 4, 8), build("interleaved-1f1b", 4, 8, 2),
      build("zb-h1", 2, 8), buildSchedule(registry(), zbV(2, 8))};
  for (const PipelineSchedule& s : schedules) {
    int moved = 0;  // RECVs posted ahead of their lowered place, communication reordered
    for (bool keep_order : {false, true}) {
      std::vector<ActionList> early;
      for (const ActionList& list : s.ranks) {
        ReceivePosting posting;
        posting.keep_communication_order = keep_order;
        early.push_back(postReceivesEarly(list, posting));
        const ActionList& out = early.back();
        const std::string where = s.name + " rank " + std::to_string(early.size() - 1);
        EXPECT_EQ(filtered(out, isNotReceive), filtered(list, isNotReceive)) << where;
        EXPECT_EQ(filtered(out, isReceive), filtered(list, isReceive)) << where;
        if (keep_order) {
          EXPECT_EQ(filtered(out, isCommunication), filtered(list, isCommunication)) << where;
        }
        const auto before = receiveBuffersHeld(list);
        for (const auto& [pool, held] : receiveBuffersHeld(out)) {
          const int bound = pool.second == ActionKind::kRecvForward
                                ? s.simulation.peak_inflight.at(static_cast<size_t>(pool.first))
                                : before.at(pool);
          EXPECT_LE(held, bound + 1) << where << " stage " << pool.first;
        }
        // Each RECV is at or before its place in the lowered list (actions are unique).
        for (size_t i = 0, j = 0; i < list.size(); ++i) {
          if (!list[i].isReceive()) continue;
          while (j < out.size() && out[j] != list[i]) ++j;
          EXPECT_LE(j, i) << where << " " << toString(list[i]);
          if (j < i && !keep_order) ++moved;
        }
      }
      EXPECT_NO_THROW(simulateSchedule(s.request, early)) << s.name;
    }
    EXPECT_GT(moved, 0) << s.name;
  }
}

// 1F1B's last stage on 2 ranks holds one micro-batch at a time: with one buffer more, the
// receive of micro-batch m + 1 is posted before the forward of m, a whole F and B ahead.
TEST(EarlyReceives, TheLastStageOf1f1bReceivesOneMicroBatchAhead) {
  const auto s = build("1f1b", 2, 3);
  EXPECT_EQ(strings(s.ranks[1]),
            (std::vector<std::string>{"1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1",
                                      "1B1", "1SEND_B1", "1RECV_F2", "1F2", "1B2", "1SEND_B2"}));
  EXPECT_EQ(strings(postReceivesEarly(s.ranks[1], {})),
            (std::vector<std::string>{"1RECV_F0", "1RECV_F1", "1F0", "1B0", "1SEND_B0", "1RECV_F2",
                                      "1F1", "1B1", "1SEND_B1", "1F2", "1B2", "1SEND_B2"}));
  // The first stage waits for one gradient at a time: two receives are posted before its
  // first forward, the third when B0 gives a buffer back.
  EXPECT_EQ(strings(postReceivesEarly(s.ranks[0], {})),
            (std::vector<std::string>{"0RECV_B0", "0RECV_B1", "0F0", "0SEND_F0", "0F1", "0SEND_F1",
                                      "0B0", "0RECV_B2", "0F2", "0SEND_F2", "0B1", "0B2"}));
}

// Shared cores (Note [Ranks that share cores]) where every thread has a core now and had
// one when measured: the time-ordered run gives what the plain one gives, start by start.
TEST(SharedCores, ACoreForEveryThreadChangesNothing) {
  const std::vector<std::pair<std::string, int>> schedules = {
      {"gpipe", 1}, {"1f1b", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}};
  for (const auto& [name, per_rank] : schedules) {
    for (int P : {2, 3, 4}) {
      const int S = P * per_rank;
      ActionCosts costs;
      costs.per_stage.assign(S, {1, 2, 1, 1});
      costs.per_stage[1] = {1.5, 2.5, 1.25, 1.25};
      costs.comm = 0.125;
      const PipelineSchedule s = build(name, S, 2 * P, per_rank, costs);
      ActionCosts shared = costs;
      shared.shared_cores.cores = {static_cast<double>(P)};
      shared.shared_cores.threads = {std::vector<double>(P, 1.0)};
      const SimulationResult plain = simulateSchedule(s.request, s.ranks, costs);
      const SimulationResult timed = simulateSchedule(s.request, s.ranks, shared);
      EXPECT_DOUBLE_EQ(timed.makespan, plain.makespan) << name << " P=" << P;
      EXPECT_EQ(timed.start, plain.start) << name << " P=" << P;
      EXPECT_EQ(timed.busy, plain.busy) << name << " P=" << P;
    }
  }
}

// P ranks of one thread on one core, their costs measured with all P computing (a share
// of 1 / P): without messages' time some rank always computes, so the core never idles and
// the step is the measured work over P, whatever the schedule; with a tail per rank of
// sums and optimizer and none of waiting, the tails' work too. The plain simulator takes
// the measured costs as durations, as if each rank had its own core the whole step.
TEST(SharedCores, OneCoreIsNeverIdleSoTheStepIsTheWorkOverTheRanks) {
  const std::vector<std::pair<std::string, int>> schedules = {
      {"gpipe", 1}, {"1f1b", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}};
  for (const auto& [name, per_rank] : schedules) {
    for (int P : {2, 4}) {
      for (int M : {P, 2 * P}) {
        const int S = P * per_rank;
        ActionCosts costs;
        costs.per_stage.assign(S, {1, 2, 1, 1});
        costs.per_stage[0] = {2, 3, 1.5, 1.5};
        const PipelineSchedule s = build(name, S, M, per_rank, costs);
        double work = 0;
        for (const ActionList& rank : s.ranks) {
          for (const Action& a : rank) work += costs.of(a.kind, a.stage, a.microbatch);
        }
        costs.shared_cores.cores = {1};
        costs.shared_cores.threads = {std::vector<double>(P, 1.0)};
        costs.shared_cores.measured_share = 1.0 / P;
        const SimulationResult timed = simulateSchedule(s.request, s.ranks, costs);
        EXPECT_NEAR(timed.makespan, work / P, 1e-9 * work) << name << " P=" << P << " M=" << M;
        EXPECT_LT(timed.makespan, s.simulation.makespan) << name << " P=" << P << " M=" << M;
        costs.shared_cores.tail_wait.assign(P, 0);
        costs.shared_cores.tail_sum.assign(P, 0);
        costs.shared_cores.tail_compute.assign(P, 0);
        for (int r = 0; r < P; ++r) {
          costs.shared_cores.tail_sum[r] = 0.25 * (P - r);
          costs.shared_cores.tail_compute[r] = 0.5 * (r + 1);
        }
        const double tails = 0.75 * P * (P + 1) / 2;
        EXPECT_NEAR(simulateSchedule(s.request, s.ranks, costs).makespan, (work + tails) / P,
                    1e-9 * work)
            << name << " P=" << P << " M=" << M;
      }
    }
  }
}

// 2 pipeline ranks of one thread on 2 cores, with optimizers of 0.25 and 1 after their
// sums, which wait `wait` each.
ActionCosts twoRanksWithTails(std::vector<double> wait) {
  ActionCosts costs;
  costs.shared_cores.cores = {2};
  costs.shared_cores.threads = {{1, 1}};
  costs.shared_cores.tail_wait = std::move(wait);
  costs.shared_cores.tail_compute = {0.25, 1};
  return costs;
}

// A tied weight's sum waits for every rank holding a copy: GPipe, 2 stages of F 1 and B 2,
// one micro-batch, each rank on a core of its own. The last stage's actions end at 4 (F at
// 1-2, B at 2-4), the first's at 6. Sums that wait 0.5 and 1.5 end at 6.5 and 5.5; the
// optimizers, 0.25 and 1, start once both have summed: the step ends at 7.5. Summing a tie
// with the first, the last rank waits from 6 and sums until 7.5, and the step ends at 8.5.
TEST(SharedCores, ATiedWeightsSumWaitsForEveryRankHoldingACopy) {
  const PipelineSchedule s = build("gpipe", 2, 1);
  ActionCosts costs = twoRanksWithTails({0.5, 1.5});
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan, 7.5);
  costs.shared_cores.tail_after = {{1}, {0}};
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan, 8.5);
}

// Note [A step's tail on shared cores]: no optimizer steps before every rank has summed,
// and the sums compute on the cores like actions. GPipe, 2 stages of F 1 and B 2, one
// micro-batch, the last stage's actions ending at 4 and the first's at 6. Optimizers of 0.25
// and 1 on cores of their own, with no sums: both start at 6, and the step ends at 7 (not at
// 6.25, the last rank's optimizer stepping at 4-5), or 7.5 where the join takes 0.5. On one core,
// measured alone, with sums of 1 each: the last rank's sum shares the core with the first's last
// backward from 4 to 6, the backward ends alone at 7, its sum at 8, and the optimizers at 9.25: the
// core never idles. Sums that waited 1 instead would leave the core idle from 6 to 7, and the
// optimizers would end at 8.25.
TEST(SharedCores, OptimizersStepAfterEveryRankSummedAndTheSumsTakeCores) {
  const PipelineSchedule s = build("gpipe", 2, 1);
  ActionCosts costs = twoRanksWithTails({0, 0});
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan, 7);
  costs.shared_cores.tail_join = 0.5;  // the step's all-reduce, after every rank's sums
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan, 7.5);
  costs.shared_cores.tail_join = 0;
  costs.shared_cores.cores = {1};
  costs.shared_cores.tail_sum = {1, 1};
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan, 9.25);
  costs.shared_cores.tail_sum = {0, 0};
  costs.shared_cores.tail_wait = {1, 1};
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan, 8.25);
}

// GPipe, 2 stages of F 1 and B 2 with replicas: each pipeline rank is 2 threads (dp 2)
// on one machine of 2 cores, measured with all 4 computing (a share of 1/2). Alone, a rank
// computes twice as fast as measured; beside the other, as measured. One micro-batch:
// F0 and B0 of each stage alone, so 3 x 2 / 2. Two on 4 cores (a share of 1 now): the plain
// step at twice the speed, 3 x 3 / 2.
TEST(SharedCores, ARankAloneGetsTheCoresTheOthersLeave) {
  for (int M : {1, 2}) {
    const PipelineSchedule s = build("gpipe", 2, M);
    ActionCosts costs;
    costs.shared_cores.cores = {2};
    costs.shared_cores.threads = {{2, 2}};
    costs.shared_cores.measured_share = 0.5;
    const SimulationResult timed = simulateSchedule(s.request, s.ranks, costs);
    // M = 2: F0 alone (0.5), F1 | F0 together (1), F1 alone (0.5), B alone (1), B | B
    // together (2), B alone (1).
    EXPECT_DOUBLE_EQ(timed.makespan, M == 1 ? 3.0 : 6.0) << "M=" << M;
    costs.shared_cores.cores = {4};
    EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, costs).makespan,
                     s.simulation.makespan / 2)
        << "M=" << M;
  }
  // Two machines of a core each, one rank on each, measured sharing a core: each rank runs
  // at twice the measured speed all the time, while messages take what they take; the plain
  // simulator with half the costs.
  const PipelineSchedule s = build("1f1b", 2, 4);
  ActionCosts apart;
  apart.comm = 0.25;
  apart.shared_cores.cores = {1, 1};
  apart.shared_cores.threads = {{1, 0}, {0, 1}};
  apart.shared_cores.measured_share = 0.5;
  ActionCosts halved;
  halved.forward = 0.5;
  halved.backward = 1;
  halved.comm = 0.25;
  EXPECT_DOUBLE_EQ(simulateSchedule(s.request, s.ranks, apart).makespan,
                   simulateSchedule(s.request, s.ranks, halved).makespan);
}

TEST(Schedules, DeadlockIsRejectedWithTheStuckActionsMarked) {
  ScheduleOptions o;
  o.schedule = std::string(PPSTAGE_FIXTURES_DIR) + "/deadlock.csv";
  try {
    buildSchedule(registry(), o);
    FAIL() << "expected a ScheduleError";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    EXPECT_NE(e.grid().find("[0B0]"), std::string::npos) << e.grid();
    EXPECT_NE(e.grid().find("[1F1]"), std::string::npos) << e.grid();
  }
}

TEST(Schedules, HandWrittenTableRuns) {
  ScheduleOptions o;
  o.schedule = std::string(PPSTAGE_SOURCE_DIR) + "/schedules/examples/1f1b_2stages_4mb.csv";
  const auto s = buildSchedule(registry(), o);
  EXPECT_EQ(s.request.num_stages, 2);
  EXPECT_EQ(s.request.num_microbatches, 4);
  EXPECT_NEAR(s.simulation.bubble_fraction, 1.0 / 5, 1e-12);
}

TEST(Schedules, MalformedCsvNamesLineAndColumn) {
  EXPECT_NE(errorOf([] {
              scheduleFromCsv("# header\n0F0,0B0\n1F0, 1X0\n", "t.csv");
            }).find("t.csv:3:6: unknown action kind 'X'"),
            std::string::npos);
  EXPECT_NE(errorOf([] { scheduleFromCsv("0F0,,0B0\n", "t.csv"); }).find("t.csv:1:5: empty"),
            std::string::npos);
  EXPECT_NE(errorOf([] { scheduleFromCsv("F0\n", "t.csv"); }).find("t.csv:1:1: 'F0' is not"),
            std::string::npos);
  EXPECT_THROW(scheduleFromCsv("# only comments\n", "t.csv"), Error);
}

TEST(Schedules, ValidatorCatchesBrokenTables) {
  const ScheduleOptions o;
  auto fails = [&](const std::string& table, const std::string& expected) {
    const std::string error = errorOf([&] { scheduleFromTable(table, "t.csv", o); });
    EXPECT_NE(error.find(expected), std::string::npos) << table << " -> " << error;
  };
  fails("0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n", "stage 0, micro-batch 1 has no backward");
  fails("0F0,0B0,0F0\n1F0,1B0\n", "appears twice");
  fails("0F0,0B0,1F0\n1B0\n", "but stage 1 is on rank 1");
  fails("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n", "0SEND_F0 is never received");
  fails("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n",
        "1F0 needs its input first, so it must come after 1RECV_F0");
  fails("0F0,0I0,0B0\n", "both a full backward and an I/W split");
}

TEST(Schedules, RequestsASchedulCannotServeAreClearErrors) {
  EXPECT_NE(errorOf([] { build("zb-h1", 4, 3); }).find("at least as many micro-batches"),
            std::string::npos);
  EXPECT_NE(errorOf([] { build("interleaved-1f1b", 4, 3, 2); }).find("multiple of the pipeline"),
            std::string::npos);
  EXPECT_NE(errorOf([] { build("1f1b", 6, 8, 4); }).find("stages_per_rank must divide"),
            std::string::npos);
  EXPECT_NE(errorOf([] { build("1f1b", 4, 8, 2); }).find("one stage per rank"), std::string::npos);
  const std::string unknown = errorOf([] { build("zero-bubble", 4, 8); });
  EXPECT_NE(unknown.find("known schedules: 1f1b, gpipe, interleaved-1f1b, zb-h1, zb-v"),
            std::string::npos)
      << unknown;
}

TEST(SchedulePlugins, ExamplePluginLoadsRegistersAndValidates) {
  ScheduleRegistry plugins = makeScheduleRegistry(PPSTAGE_EXAMPLE_PLUGIN);
  ASSERT_NE(plugins.find("reverse-gpipe"), nullptr);
  ScheduleOptions o;
  o.schedule = "reverse-gpipe";
  o.stages = 3;
  o.microbatches = 5;
  const auto s = buildSchedule(plugins, o);
  EXPECT_NEAR(s.simulation.bubble_fraction, 2.0 / 7, 1e-12);  // GPipe's: (S-1)/(M+S-1)
  EXPECT_EQ(toString(s.ranks[2][s.ranks[2].size() - 2]), "2B0") << "backwards in reverse";
}

TEST(SchedulePlugins, BadPluginsAreClearErrors) {
  ScheduleRegistry r;
  EXPECT_NE(errorOf([&] {
              loadSchedulePlugin(r, PPSTAGE_NO_SYMBOL_PLUGIN);
            }).find("does not export ppstage_register_schedules"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              loadSchedulePlugin(r, "/nonexistent/plugin.so");
            }).find("cannot load schedule plugin"),
            std::string::npos);
}

// What a plugin registers is checked before it is used: an empty name is refused as such
// (not as "already registered"), and an action's stage below zero is refused before it
// indexes anything.
TEST(SchedulePlugins, AnEmptyNameAndANegativeStageAreRefused) {
  ScheduleRegistry r;
  const auto gpipe = *registry().find("gpipe");
  const std::string empty = errorOf([&] { r.add("", "mine", gpipe); });
  EXPECT_NE(empty.find("must have a name"), std::string::npos) << empty;
  EXPECT_EQ(empty.find("already registered"), std::string::npos) << empty;
  r.add("negative", "a stage of -1", [&](const ScheduleRequest& request) {
    std::vector<ActionList> ranks = gpipe(request);
    ranks[0][0].stage = -1;
    return ranks;
  });
  ScheduleOptions o;
  o.schedule = "negative";
  o.stages = 2;
  o.microbatches = 2;
  const std::string negative = errorOf([&] { buildSchedule(r, o); });
  EXPECT_NE(negative.find("outside the 2 stages and 2 micro-batches"), std::string::npos)
      << negative;
}

TEST(ActionCosts, ParsesFourNumbers) {
  const ActionCosts c = ActionCosts::parse("1, 2.5,0.5,1");
  EXPECT_DOUBLE_EQ(c.backward, 2.5);
  EXPECT_THROW(ActionCosts::parse("1,2,3"), Error);
  EXPECT_THROW(ActionCosts::parse("1,2,x,1"), Error);
}

// A figure per kind is indexed by the kind itself, in its own index space: compute kinds
// and transfer kinds do not mix, and the kinds come in ActionKind order with their names.
TEST(PerKind, IndexesByKindWithinItsSpace) {
  PerCompute<double> costs{1, 2, 3, 4};
  EXPECT_EQ(costs[ActionKind::kBackwardInput], 3);
  costs[ActionKind::kBackwardWeight] += 1;
  EXPECT_EQ(costs[ActionKind::kBackwardWeight], 5);
  std::vector<std::string> names;
  for (const ActionKind kind : PerTransfer<double>::kinds()) names.push_back(kindName(kind));
  EXPECT_EQ(names, (std::vector<std::string>{"SEND_F", "RECV_F", "SEND_B", "RECV_B"}));
  PerTransfer<double> waits;
  waits[ActionKind::kRecvBackward] = 0.5;
  EXPECT_EQ(*(waits.end() - 1), 0.5);
  EXPECT_THROW(waits[ActionKind::kForward], InternalError);
}

}  // namespace
}  // namespace ppstage
