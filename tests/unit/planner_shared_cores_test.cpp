// Ranks that shared cores when their costs were measured (Note [Ranks that share cores],
// src/plan/stage_costs.h), on cost profiles written here: a pipeline whose ranks wait part
// of the step computes faster than measured, by the share of time they compute but never
// more than the sharing; a layout whose ranks all compute at once keeps its costs; the
// planner's lower bounds stay below its predictions; and the profile carries the sharing.
#include <gtest/gtest.h>

#include <string>

#include "ppstage/core/error.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "support/plan_profiles.h"

namespace ppstage {
namespace {

// 8 blocks (per sample F 1 ms, B 2 ms, 4 KB sent on, 1000 trainable elements each), SGD's
// optimizer at 1 ns an element, measured at `sharing` threads a core.
CostProfile profileAt(double sharing) {
  CostProfile p = test::emptyProfile("shared", 16, 1e-9, 4, 0);
  for (int u = 0; u < 8; ++u) {
    p.units.push_back(test::blockUnit(u, 4000, 1000, {1e3, 1e3}, {1e3, 1e3}));
  }
  p.core_sharing = sharing;
  return p;
}

PlanCandidate predicted(const CostProfile& profile, PlanCandidate c) {
  return predictCandidate(profile, c, makeScheduleRegistry());
}

// 1F1B at pp 2, M 4 of 4 samples, cut in half: each rank computes 4 x (16 + 32) ms in a
// makespan of (4 + 1) x 48 ms (and messages of 5 us and 16 KB), so its ranks compute u =
// 0.8 of the step. Measured at 2 threads a core, the actions take 0.8 of
// their measured seconds in the run; the messages do not shrink, so u ends a little below.
TEST(PlannerSharedCores, APipelineComputesFasterByTheShareItComputes) {
  const PlanCandidate c = test::oneFOneB(1, 2, 4, 4, {4});
  const PlanCandidate alone = predicted(profileAt(1), c);
  const PlanCandidate shared = predicted(profileAt(2), c);
  EXPECT_NEAR(alone.makespan_s, 5 * 48e-3, 1e-3);
  EXPECT_NEAR(shared.makespan_s / alone.makespan_s, 0.8, 0.01);
  EXPECT_LT(shared.makespan_s, 0.8 * alone.makespan_s);
  EXPECT_DOUBLE_EQ(shared.tail_s, alone.tail_s);  // the tail runs on every rank at once
}

// Measured at 1.1 threads a core, the actions can gain 1 / 1.1 at most, though the ranks
// compute 0.8 of the step: the cores were shared only a little when measured.
TEST(PlannerSharedCores, TheGainIsAtMostTheSharingMeasured) {
  const PlanCandidate c = test::oneFOneB(1, 2, 4, 4, {4});
  const PlanCandidate alone = predicted(profileAt(1), c);
  const PlanCandidate shared = predicted(profileAt(1.1), c);
  EXPECT_NEAR(shared.makespan_s / alone.makespan_s, 1 / 1.1, 1e-4);
}

// One stage a rank with nothing to wait for (pp 1): it computes the whole makespan, as it
// was measured.
TEST(PlannerSharedCores, RanksThatNeverWaitKeepTheirCosts) {
  const PlanCandidate c = test::oneFOneB(4, 1, 1, 4, {});
  EXPECT_DOUBLE_EQ(predicted(profileAt(2), c).step_s, predicted(profileAt(1), c).step_s);
}

// The plan's lower bounds (which prune candidates) hold under the gain: every candidate
// simulated predicts at least its bound, so the best of a plan at 2 threads a core is the
// best of every candidate predicted one by one.
TEST(PlannerSharedCores, ThePlanFindsTheFastestUnderSharing) {
  const CostProfile profile = profileAt(2);
  PlanRequest request;
  request.ranks = 4;
  request.schedules = {"1f1b"};
  request.keep = 100000;
  const Plan plan = planPipeline(profile, request, makeScheduleRegistry());
  ASSERT_FALSE(plan.best.empty());
  const PlanCandidate& chosen = plan.best.front();
  for (const PlanCandidate& c : plan.best) EXPECT_GE(c.step_s * 1.005, chosen.step_s);
  const PlanCandidate pipeline = predicted(profile, test::oneFOneB(2, 2, 4, 2, {4}));
  EXPECT_LE(chosen.step_s, pipeline.step_s * 1.005) << chosen.label();
}

// The profile's JSON carries the sharing; one written before it reads as 1; below 1 is
// refused.
TEST(PlannerSharedCores, TheProfileCarriesTheSharing) {
  const CostProfile shared = profileAt(2);
  EXPECT_DOUBLE_EQ(readCostProfile(costProfileToJson(shared), "test").core_sharing, 2);
  std::string text = costProfileToJson(shared);
  const std::string field = "\"core_sharing\": 2.0,";
  ASSERT_NE(text.find(field), std::string::npos) << text;
  std::string old = text;
  old.erase(old.find(field), field.size());
  EXPECT_DOUBLE_EQ(readCostProfile(old, "old").core_sharing, 1);
  std::string below = text;
  below.replace(below.find(field), field.size(), "\"core_sharing\": 0.5,");
  EXPECT_THROW(readCostProfile(below, "below"), Error);
}

}  // namespace
}  // namespace ppstage
