// The planner's choice of a sharded optimizer (Note [Sharding in the plan], plan/planner.h)
// on cost profiles written here: with AdamW every data-parallel candidate shards, keeping
// the formula's bytes less per rank and stepping half the elements; a budget only sharding
// meets is met without recomputing; fp32 SGD without momentum, which sharding makes larger
// (its masters), shards only where that still fits; and the choice reaches the config file
// train reads, and back.
#include <gtest/gtest.h>

#include <fstream>

#include "ppstage/core/topology.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "support/plan_profiles.h"

namespace ppstage {
namespace {

constexpr double kElements = 1e6;  // trainable per unit

// `units` blocks of 4 MB of fp32 parameters (1M trainable elements), measured at 1 and 4
// samples (per sample: F 1 ms, B 2 ms, 0.1 MB kept), optimizer state `optimizer_state`
// bytes per element beside the gradient, and recomputed in full: 0.01 MB kept, B 1 ms
// longer.
CostProfile stateHeavyProfile(int units, int64_t batch, double optimizer_state) {
  CostProfile p =
      test::emptyProfile("state-heavy", batch, 1e-8, 4 + optimizer_state, optimizer_state);
  const auto elements = static_cast<int64_t>(kElements);
  for (int u = 0; u < units; ++u) {
    p.units.push_back(test::blockUnit(u, 4 * elements, elements, {0.1e6, 0.1e6}, {0.01e6, 0.2e6}));
  }
  return p;
}

PlanRequest request(int ranks, double budget_bytes) {
  PlanRequest r;
  r.ranks = ranks;
  r.schedules = {"1f1b"};
  r.memory_budget_bytes = budget_bytes;
  r.keep = 100000;
  return r;
}

// `c` predicted again with its optimizer sharded or not.
PlanCandidate predictedWith(const CostProfile& profile, PlanCandidate c, bool shard,
                            const ScheduleRegistry& registry) {
  c.shard_optimizer = shard;
  c.recompute = PlannedRecompute();
  return predictCandidate(profile, c, registry);
}

// AdamW at pp 2 x dp 2 (8 units: 4 per rank): sharded, a rank keeps per element its fp32
// gradient whole and half of the moments (8 bytes) and of an fp32 master (4), 10 bytes
// instead of 12; and steps half its elements.
TEST(PlannerShard, AdamWShardsEveryReplicatedCandidateByTheFormula) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = stateHeavyProfile(8, 16, 8);
  const Plan plan = planPipeline(profile, request(4, 0), registry);
  ASSERT_FALSE(plan.best.empty());
  bool replicated = false;
  for (const PlanCandidate& c : plan.best) {
    EXPECT_EQ(c.shard_optimizer, c.dp > 1) << c.label();
    EXPECT_FALSE(c.recompute.any()) << c.label();
    EXPECT_EQ(c.label().find(" shard_optimizer") != std::string::npos, c.shard_optimizer);
    if (c.dp != 2 || c.pp != 2 || c.stages_per_rank != 1 ||
        c.stage_starts != std::vector<size_t>{4})
      continue;
    replicated = true;
    const PlanCandidate plain = predictedWith(profile, c, false, registry);
    const PlanCandidate sharded = predictedWith(profile, c, true, registry);
    const double rank_elements = 4 * kElements;
    EXPECT_NEAR(plain.peak_bytes - sharded.peak_bytes, rank_elements * (12 - (4 + 12.0 / 2)), 1);
    EXPECT_NEAR(plain.tail_s - sharded.tail_s, profile.optimizer_s_per_element * rank_elements / 2,
                1e-12);
    EXPECT_DOUBLE_EQ(plain.makespan_s, sharded.makespan_s);
    EXPECT_NEAR(sharded.peak_bytes, c.peak_bytes, 1e-3);  // what the planner saw
    const std::string reason = shardingReason(c, profile);
    EXPECT_NE(reason.find("optimizer sharded over 2 replicas: 22.9 MB of state and fp32 masters on "
                          "the largest rank instead of 30.5 MB"),
              std::string::npos)
        << reason;
  }
  EXPECT_TRUE(replicated) << "no pp 2 x dp 2 candidate cut in halves among the best";
}

// One unit: every candidate of 2 ranks is dp 2. A budget between the sharded and the
// unsharded peak is met by sharding, without recomputing.
TEST(PlannerShard, ABudgetOnlyShardingMeetsIsMetWithoutRecomputing) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = stateHeavyProfile(1, 16, 8);
  const PlanCandidate fastest = planPipeline(profile, request(2, 0), registry).best.front();
  ASSERT_TRUE(fastest.shard_optimizer);
  const double sharded = predictedWith(profile, fastest, true, registry).peak_bytes;
  const double plain = predictedWith(profile, fastest, false, registry).peak_bytes;
  ASSERT_LT(sharded, plain);
  const double budget = (sharded + plain) / 2 / 0.97;  // a peak leaves 3% free
  const Plan plan = planPipeline(profile, request(2, budget), registry);
  ASSERT_FALSE(plan.best.empty());
  for (const PlanCandidate& c : plan.best) {
    EXPECT_TRUE(c.shard_optimizer) << c.label();
    EXPECT_LE(c.peak_bytes, 0.97 * budget) << c.label();
    if (c.microbatches == fastest.microbatches) EXPECT_FALSE(c.recompute.any()) << c.label();
  }
}

// fp32 SGD without momentum keeps only the gradient: sharding adds a master of 1/dp (6
// bytes an element instead of 4) but steps half the elements. It is chosen where it fits,
// not where only the unsharded run fits.
TEST(PlannerShard, ShardingThatCostsMemoryIsChosenOnlyWhereItFits) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = stateHeavyProfile(1, 16, 0);
  const PlanCandidate fastest = planPipeline(profile, request(2, 0), registry).best.front();
  EXPECT_TRUE(fastest.shard_optimizer) << fastest.label();
  const double sharded = predictedWith(profile, fastest, true, registry).peak_bytes;
  const double plain = predictedWith(profile, fastest, false, registry).peak_bytes;
  EXPECT_NEAR(sharded - plain, kElements * 2, 1);
  const double budget = (sharded + plain) / 2 / 0.97;
  const PlanCandidate chosen = planPipeline(profile, request(2, budget), registry).best.front();
  EXPECT_FALSE(chosen.shard_optimizer) << chosen.label();
  EXPECT_FALSE(chosen.recompute.any()) << chosen.label();
  EXPECT_TRUE(shardingReason(chosen, profile).empty());
}

TEST(PlannerShard, TheConfigFileCarriesTheChoiceAndTheRunsConfigGivesItBack) {
  const CostProfile profile = stateHeavyProfile(8, 16, 8);
  PlanCandidate c = test::oneFOneB(2, 2, 4, 2, {4});
  c.shard_optimizer = true;
  const std::string path = testing::TempDir() + "ppstage_shard_planned.ini";
  {
    std::ofstream file(path);
    file << configIniOf({{"train.shard_optimizer", "false"}}, c, profile, "a plan");
  }
  const Config read = test::readConfigFile(path);
  EXPECT_TRUE(read.train.shard_optimizer);
  EXPECT_EQ(read.train.dp, 2);
  EXPECT_TRUE(candidateOf(read, Topology::forJob(4, 2, 2, 1)).shard_optimizer);

  Config applied = read;
  c.shard_optimizer = false;
  applyCandidate(c, profile, applied);
  EXPECT_FALSE(applied.train.shard_optimizer);
}

// A profile's optimizer state survives JSON; one written before it was recorded reads it
// as its state less the fp32 gradient (and bf16's master).
TEST(PlannerShard, ProfilesKeepTheOptimizerStateAndOlderOnesDeriveIt) {
  const CostProfile profile = stateHeavyProfile(2, 16, 8);
  const std::string text = costProfileToJson(profile);
  EXPECT_DOUBLE_EQ(readCostProfile(text, "test").optimizer_state_bytes_per_element, 8);
  std::string older = text;
  const std::string field = "\"optimizer_state_bytes_per_element\"";
  const size_t at = older.find(field);
  ASSERT_NE(at, std::string::npos);
  older.replace(at, field.size(), "\"unused\"");
  EXPECT_DOUBLE_EQ(readCostProfile(older, "test").optimizer_state_bytes_per_element, 8);
  EXPECT_DOUBLE_EQ(profile.stateBytesPerElement(4, true), 4 + 12.0 / 4);
  EXPECT_DOUBLE_EQ(profile.stateBytesPerElement(1, true), 12);
  EXPECT_DOUBLE_EQ(profile.stateBytesPerElement(4, false), 12);
}

}  // namespace
}  // namespace ppstage
