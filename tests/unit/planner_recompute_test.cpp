// The planner's recomputation (Note [Recomputation in the plan], plan/planner.h) on cost
// profiles written here: a budget that nothing fits without it is met by recomputing the
// first stages' blocks first, the prediction of the chosen configuration is what the
// planner saw, recomputing everything is no faster, a budget nothing fits names the
// smallest peak with every block recomputed, and the choice survives JSON and the config
// file train reads. Also Note [A stage's backward peak] against its formula by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "support/error_of.h"
#include "support/plan_profiles.h"

namespace ppstage {
namespace {

using test::errorOf;

// `units` blocks "layers.u", measured at 1 and 4 samples: per sample F 1 ms, B 2 ms (I and
// W 1 ms each), 0.5 MB kept and a backward peak of 0.25 MB; with the block recomputed in
// full, 0.05 MB kept, B and I 1 ms longer (the rerun) and a backward peak of 0.75 MB.
// 1 MB of parameters (250k trainable floats) each; SGD's gradient as state.
CostProfile blockProfile(int units, int64_t batch) {
  CostProfile p = test::emptyProfile("blocks", batch, 1e-9, 4, 0);
  for (int u = 0; u < units; ++u) {
    p.units.push_back(test::blockUnit(u, 1000000, 250000, {0.5e6, 0.25e6}, {0.05e6, 0.75e6}));
  }
  return p;
}

PlanRequest oneFOneB(int ranks, double budget_bytes) {
  PlanRequest request;
  request.ranks = ranks;
  request.schedules = {"1f1b"};
  request.memory_budget_bytes = budget_bytes;
  request.keep = 100000;
  return request;
}

// The smallest peak any candidate predicts without recomputation.
double smallestPlainPeak(CostProfile profile, const ScheduleRegistry& registry) {
  for (UnitCost& unit : profile.units) unit.full = RecomputedUnitCost();
  double smallest = 1e300;
  const Plan plan = planPipeline(profile, oneFOneB(2, 0), registry);
  for (const PlanCandidate& c : plan.best) {
    smallest = std::min(smallest, c.peak_bytes);
  }
  return smallest;
}

// A batch of 15 leaves no data parallelism over 2 ranks: every candidate is a pipeline of
// 2 ranks, whose stage 0 holds 2 micro-batches under 1F1B and stage 1 one.
TEST(PlannerRecompute, FitsABudgetByRecomputingTheFirstStagesBlocksFirst) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = blockProfile(8, 15);
  const double budget = 0.9 * smallestPlainPeak(profile, registry);
  const Plan plan = planPipeline(profile, oneFOneB(2, budget), registry);
  ASSERT_FALSE(plan.best.empty());
  const PlanCandidate& chosen = plan.best.front();
  for (const PlanCandidate& c : plan.best) {
    EXPECT_TRUE(c.recompute.any()) << c.label();
    EXPECT_LE(c.peak_bytes, budget) << c.label();
  }
  ASSERT_EQ(chosen.pp, 2) << chosen.label();
  ASSERT_EQ(chosen.recompute.blocks.size(), 2u);
  EXPECT_EQ(chosen.recompute.policy, RecomputePolicy::kFull);
  EXPECT_GE(chosen.recompute.blocks[0], chosen.recompute.blocks[1]) << chosen.label();
  EXPECT_EQ(chosen.inflight, (std::vector<int>{2, 1}));
  EXPECT_NE(chosen.label().find(" full "), std::string::npos) << chosen.label();

  // What predictCandidate says of the chosen configuration is what the planner saw.
  const PlanCandidate again = predictCandidate(profile, chosen, registry);
  EXPECT_NEAR(again.step_s, chosen.step_s, 1e-12);
  EXPECT_NEAR(again.peak_bytes, chosen.peak_bytes, 1e-3);

  // Every block recomputed under the same schedule fits as well, and is no faster.
  PlanCandidate everything = chosen;
  everything.recompute.units.assign(2, 0);
  for (size_t u = 0; u < profile.units.size(); ++u) {
    const size_t stage = u < chosen.stage_starts.at(0) ? 0 : 1;
    ++everything.recompute.units[stage];
  }
  const PlanCandidate all = predictCandidate(profile, everything, registry);
  EXPECT_LE(all.peak_bytes, chosen.peak_bytes);
  EXPECT_GE(all.step_s, chosen.step_s);

  // Why, per stage.
  const std::vector<std::string> reasons = recomputeReasons(chosen, profile);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_NE(reasons[0].find("stage 0: recomputes "), std::string::npos) << reasons[0];
  EXPECT_NE(reasons[0].find("it holds 2 micro-batches in flight"), std::string::npos) << reasons[0];
}

TEST(PlannerRecompute, ABudgetNothingFitsNamesTheSmallestPeakWithEveryBlockRecomputed) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = blockProfile(8, 15);
  const std::string error = errorOf([&] { planPipeline(profile, oneFOneB(2, 1e6), registry); });
  EXPECT_NE(error.find("the smallest predicted peak per rank is "), std::string::npos) << error;
  EXPECT_NE(error.find(", with every block recomputed"), std::string::npos) << error;
}

TEST(PlannerRecompute, WithoutABudgetNothingRecomputes) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const Plan plan = planPipeline(blockProfile(8, 16), oneFOneB(2, 0), registry);
  ASSERT_FALSE(plan.best.empty());
  for (const PlanCandidate& c : plan.best) {
    EXPECT_FALSE(c.recompute.any()) << c.label();
  }
}

TEST(PlannerRecompute, ProfileRoundTripsItsBlocksAndRecomputedFigures) {
  const CostProfile profile = blockProfile(3, 16);
  const CostProfile back = readCostProfile(costProfileToJson(profile), "test");
  ASSERT_EQ(back.units.size(), 3u);
  EXPECT_EQ(back.units[1].blocks, std::vector<std::string>{"layers.1"});
  EXPECT_EQ(back.units[1].full.activation_bytes, profile.units[1].full.activation_bytes);
  EXPECT_EQ(back.units[1].full.backward_peak_bytes, profile.units[1].full.backward_peak_bytes);
  EXPECT_FALSE(back.units[1].selective.measured());
  EXPECT_EQ(back.recomputePolicies(), std::vector<RecomputePolicy>{RecomputePolicy::kFull});
  EXPECT_DOUBLE_EQ(back.secondsOf(1, ActionKind::kBackward, 2, RecomputePolicy::kFull), 6e-3);
  EXPECT_DOUBLE_EQ(back.secondsOf(1, ActionKind::kBackward, 2, RecomputePolicy::kSelective), 4e-3);
}

TEST(PlannerRecompute, TheConfigFileCarriesThePolicyAndTheBlocksPerStage) {
  const CostProfile profile = blockProfile(8, 16);
  PlanCandidate c;
  c.schedule = "1f1b";
  c.pp = 2;
  c.microbatches = 8;
  c.microbatch_size = 2;
  c.stage_starts = {4};
  c.recompute.policy = RecomputePolicy::kFull;
  c.recompute.units = {3, 1};
  c.recompute.blocks = {3, 1};
  EXPECT_EQ(recomputeBlocksOf(c), "3,1");
  const std::string path = testing::TempDir() + "ppstage_recompute_planned.ini";
  {
    std::ofstream file(path);
    file << configIniOf({{"train.recompute", "selective"}}, c, profile, "a plan");
  }
  const Config read = test::readConfigFile(path);
  EXPECT_EQ(read.train.recompute, RecomputePolicy::kFull);
  EXPECT_EQ(read.train.recompute_blocks, "3,1");
}

// One stage of 4 units, one micro-batch of 4 samples with every block recomputed: while
// the first unit's backward runs, the other 3 have freed what they kept (0.05 MB a sample)
// and their new weight gradients (1 MB each) wait, beside its own peak (0.75 MB a sample).
// The step's first backward makes the accumulated gradients: none exist before it (Note [A
// rank's memory through its actions]).
TEST(PlannerRecompute, AStagesBackwardPeakCountsTheGradientsWaitingBehindIt) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = blockProfile(4, 4);
  PlanCandidate c;
  c.schedule = "gpipe";
  c.pp = 1;
  c.microbatches = 1;
  c.microbatch_size = 4;
  c.recompute.policy = RecomputePolicy::kFull;
  c.recompute.units = {4};
  const PlanCandidate predicted = predictCandidate(profile, c, registry);
  const double resident = 4 * 1e6;  // parameters
  const double kept = 4 * 4 * 0.05e6;
  const double backward = 4 * 0.75e6 + 3 * 1e6 - 3 * 4 * 0.05e6;
  EXPECT_NEAR(predicted.peak_bytes, resident + kept + backward, 1);
}

}  // namespace
}  // namespace ppstage
