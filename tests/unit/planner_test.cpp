// The planner (plan/planner.h) on cost profiles written here, against the references it
// must agree with: the schedule's simulator run directly on the same stage costs, an
// exhaustive ranking (the pruned search must find the same best), the memory budget, and
// the config file `train` reads back.
#include <gtest/gtest.h>

#include <boost/program_options.hpp>

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include "ppstage/config/options.h"
#include "ppstage/core/topology.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/train/job_setup.h"
#include "support/error_of.h"
#include "support/plan_profiles.h"

namespace ppstage {
namespace {

using test::errorOf;

// `units` identical units, each F = f and B = 2f seconds per sample plus `fixed` seconds per
// micro-batch (I and W half a B each), 1 MB of parameters (250k trainable floats) and
// 0.5 MB of activations per sample, measured at 1 and 4 samples.
// `last_weight` scales the last unit's seconds (a wide head), so that cuts are uneven;
// `pending_factor` the bytes a micro-batch keeps between I and W over its activations.
CostProfile uniformProfile(int units, int64_t batch, double f = 1e-3, double fixed = 0,
                           double last_weight = 1, double pending_factor = 1) {
  // Beside each element its gradient and AdamW's two moments; slow all-reduces.
  CostProfile p = test::emptyProfile("uniform", batch, 1e-9, 12, 8);
  p.allreduce_bytes_per_s = 1e8;
  for (int u = 0; u < units; ++u) {
    UnitCost unit;
    unit.path = "layers." + std::to_string(u);
    unit.param_bytes = 1000000;
    unit.trainable_elements = 250000;
    const double weight = u + 1 == units ? last_weight : 1;
    for (double size : {1.0, 4.0}) {
      const double forward = weight * (fixed + f * size),
                   backward = weight * (fixed + 2 * f * size);
      unit.seconds.push_back({forward, backward, backward / 2, backward / 2});
      unit.activation_bytes.push_back(0.5e6 * size);
      unit.output_bytes.push_back(4096 * size);
      unit.backward_peak_bytes.push_back(0.25e6 * size);
      unit.weight_pending_bytes.push_back(pending_factor * 0.5e6 * size);
    }
    p.units.push_back(unit);
  }
  return p;
}

PlanRequest requestFor(int ranks, const ScheduleRegistry& registry, int keep = 10) {
  PlanRequest request;
  request.ranks = ranks;
  request.schedules = registry.names();
  request.keep = keep;
  return request;
}

std::vector<std::string> labels(const std::vector<PlanCandidate>& candidates, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min(n, candidates.size()); ++i) out.push_back(candidates[i].label());
  return out;
}

// A 1-replica candidate of `schedule` over `pp` pipeline ranks, one stage each.
PlanCandidate candidate(const std::string& schedule, int pp, int64_t microbatches,
                        int64_t microbatch_size) {
  PlanCandidate c;
  c.schedule = schedule;
  c.pp = pp;
  c.microbatches = microbatches;
  c.microbatch_size = microbatch_size;
  return c;
}

TEST(CostProfile, InterpolatesTheLineThroughItsTwoSizes) {
  const std::vector<int64_t> sizes{2, 8};
  const std::vector<double> values{3.0, 6.0};  // 2 + 0.5 b
  EXPECT_DOUBLE_EQ(costAtSize(sizes, values, 2), 3.0);
  EXPECT_DOUBLE_EQ(costAtSize(sizes, values, 8), 6.0);
  EXPECT_DOUBLE_EQ(costAtSize(sizes, values, 4), 4.0);
  EXPECT_DOUBLE_EQ(costAtSize(sizes, values, 16), 10.0);     // extrapolated
  EXPECT_DOUBLE_EQ(costAtSize(sizes, {6.0, 3.0}, 32), 0.0);  // never below zero
  EXPECT_DOUBLE_EQ(costAtSize({4}, {2.0}, 8), 4.0);          // one size: proportional
}

TEST(CostProfile, RoundTripsThroughJsonAndRefusesOtherFiles) {
  const CostProfile p = uniformProfile(3, 8, 2e-3, 1e-4, 1, 1.5);
  const CostProfile back = readCostProfile(costProfileToJson(p), "p.json");
  ASSERT_EQ(back.units.size(), 3u);
  EXPECT_EQ(back.units[2].path, "layers.2");
  EXPECT_EQ(back.microbatch_sizes, p.microbatch_sizes);
  for (const ActionKind kind : PerCompute<double>::kinds()) {
    EXPECT_DOUBLE_EQ(back.secondsOf(1, kind, 3), p.secondsOf(1, kind, 3));
  }
  EXPECT_DOUBLE_EQ(back.activationBytesOf(0, 2), p.activationBytesOf(0, 2));
  EXPECT_DOUBLE_EQ(back.weightPendingBytesOf(0, 2), p.weightPendingBytesOf(0, 2));
  EXPECT_EQ(back.allreduce_bytes_per_s, p.allreduce_bytes_per_s);
  // A profile written before weight_pending_bytes was measured reads it as the activations.
  std::string old_text = costProfileToJson(p);
  const size_t field = old_text.find("\"weight_pending_bytes\"");
  ASSERT_NE(field, std::string::npos);
  old_text.replace(field, std::string("\"weight_pending_bytes\"").size(), "\"unknown_field\"");
  const CostProfile old = readCostProfile(old_text, "old.json");
  EXPECT_DOUBLE_EQ(old.weightPendingBytesOf(0, 2), p.activationBytesOf(0, 2));
  EXPECT_NE(errorOf([] {
              readCostProfile("{\"units\": []}", "x.json");
            }).find("cost profile 'x.json': not a ppstage cost profile"),
            std::string::npos);
  EXPECT_NE(errorOf([] {
              readCostProfile("not json", "y.json");
            }).find("cost profile 'y.json' cannot be read"),
            std::string::npos);
}

// The step the planner predicts for a candidate is the simulator's makespan for the
// candidate's stage costs (its units summed at its micro-batch size) plus the tail.
TEST(Planner, PredictsTheSimulatorsMakespanForItsCut) {
  const CostProfile profile = uniformProfile(8, 16, 1e-3, 2e-4);
  const ScheduleRegistry registry = makeScheduleRegistry();
  PlanCandidate c = candidate("1f1b", 4, 8, 2);
  c.stage_starts = {2, 4, 6};
  const PlanCandidate predicted = predictCandidate(profile, c, registry);

  ScheduleOptions options;
  options.schedule = "1f1b";
  options.stages = 4;
  options.microbatches = 8;
  const double f = 2 * (2e-4 + 2e-3), b = 2 * (2e-4 + 4e-3);  // two units a stage
  for (int s = 0; s < 4; ++s) options.costs.per_stage.push_back({f, b, b / 2, b / 2});
  options.costs.comm = profile.messageSeconds(4096 * 2);
  const PipelineSchedule direct = buildSchedule(registry, options);
  EXPECT_NEAR(predicted.makespan_s, direct.simulation.makespan, 1e-12);
  // The optimizer over 2 units, and the step's all-reduce of 14 + 6 x 4 doubles over 4
  // ranks (3 times a 2-rank ring's latency).
  const double join = 3 * profile.allreduce_latency_s +
                      2.0 * 3 / 4 * 8 * (14 + 6 * 4) / profile.allreduce_bytes_per_s;
  EXPECT_NEAR(predicted.tail_s, 1e-9 * 500000 + join, 1e-15);
  EXPECT_NEAR(predicted.step_s, predicted.makespan_s + predicted.tail_s, 1e-15);
  // Memory: 2 units of 1 MB parameters and 3 MB of state each, 1F1B's 4 micro-batches in
  // flight on stage 0, each 2 units x 2 samples x 0.5 MB, one unit's backward peak, and
  // its receive buffers: one gradient of 2 x 4096 bytes held at once, one posted ahead.
  EXPECT_NEAR(predicted.peak_bytes,
              2 * (1e6 + 3e6) + 4 * (2 * 2 * 0.5e6) + 2 * 0.25e6 + 2 * (2 * 4096), 1);
  EXPECT_NEAR(predicted.tokens_per_s, 16 / predicted.step_s, 1e-6);
}

// --pipeline.balance time's cut (cutFor) of one layout: a head four times as slow as a
// layer pulls the cut past the params cut, and the cut found is the fastest of every
// 2-stage cut, as the simulator predicts each.
TEST(Planner, CutForFindsTheFastestCutOfItsLayout) {
  const CostProfile profile = uniformProfile(8, 16, 1e-3, 0, /*last_weight=*/4);
  const ScheduleRegistry registry = makeScheduleRegistry();
  PlanCandidate c = candidate("1f1b", 2, 4, 4);
  const PlanCandidate cut = cutFor(profile, c, registry);
  ASSERT_EQ(cut.stage_starts.size(), 1u);
  double fastest = std::numeric_limits<double>::infinity();
  for (size_t start = 1; start < profile.units.size(); ++start) {
    c.stage_starts = {start};
    fastest = std::min(fastest, predictCandidate(profile, c, registry).step_s);
  }
  EXPECT_NEAR(cut.step_s, fastest, 1e-12);
  const std::vector<size_t> by_params = paramsCut(profile, 2);
  EXPECT_EQ(by_params, std::vector<size_t>{4});
  EXPECT_GT(cut.stage_starts[0], by_params[0]);
  c.stage_starts = by_params;
  EXPECT_LT(cut.step_s, predictCandidate(profile, c, registry).step_s);
}

// The search stops early (Note [Planning a pipeline]); its best must be the best of all.
TEST(Planner, PrunedSearchFindsTheExhaustiveBest) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  for (const double last_weight : {1.0, 3.5}) {
    for (double fixed : {0.0, 5e-4}) {
      const CostProfile profile = uniformProfile(12, 32, 1e-3, fixed, last_weight);
      const Plan all = planPipeline(profile, requestFor(4, registry, 100000), registry);
      const Plan pruned = planPipeline(profile, requestFor(4, registry, 3), registry);
      std::cout << "last unit x" << last_weight << ", fixed " << fixed << ": " << all.candidates
                << " candidates; exhaustive " << all.simulated << " simulated, pruned "
                << pruned.simulated << "; best " << pruned.best[0].label() << " "
                << pruned.best[0].step_s << " s\n";
      EXPECT_LT(pruned.simulated, all.simulated);
      EXPECT_EQ(labels(pruned.best, 3), labels(all.best, 3));
      for (const PlanCandidate& c : all.best) EXPECT_GE(c.step_s, all.best[0].step_s * 0.995);
    }
  }
}

// A micro-batch between its I and its W holds the weight ops' inputs and the gradients
// arriving at them: where that is more than its activations, zero-bubble schedules' peaks
// grow by it for each micro-batch in flight, and schedules without W do not change.
TEST(Planner, CountsWhatWaitsForWInZeroBubblePeaks) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile even = uniformProfile(8, 32);
  const CostProfile wide = uniformProfile(8, 32, 1e-3, 0, 1, /*pending_factor=*/2);
  // Stage 0 of 2: 4 units of 0.5 MB per sample, micro-batches of 4 samples.
  const double stage_activations = 4 * 0.5e6 * 4;
  for (const std::string schedule : {"1f1b", "gpipe", "zb-h1", "zb-v"}) {
    PlanCandidate c = candidate(schedule, 2, 8, 4);
    if (schedule == "zb-v") {
      c.stages_per_rank = 2;
      c.placement = Placement::kV;
    }
    const double grown = predictCandidate(wide, c, registry).peak_bytes -
                         predictCandidate(even, c, registry).peak_bytes;
    if (schedule.rfind("zb", 0) == 0) {
      const double per_stage = stage_activations / c.stages_per_rank;
      EXPECT_GE(grown, per_stage * 0.999) << schedule;
      EXPECT_NEAR(std::fmod(grown + per_stage / 2, per_stage), per_stage / 2, 1) << schedule;
    } else {
      EXPECT_EQ(grown, 0) << schedule;
    }
  }
}

// GPipe and 1F1B of one micro-batch on one stage per rank run the same actions (and
// ZB-H1's here, whose I and W add up to B): the plan lists that run once, and every other candidate
// it lists differs in layout, cut or micro-batches, or in what it predicts.
TEST(Planner, ListsOneRunOnceWhateverSchedulesProduceIt) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const Plan plan = planPipeline(uniformProfile(8, 64), requestFor(2, registry, 100000), registry);
  int dp_one_microbatch = 0;
  for (size_t i = 0; i < plan.best.size(); ++i) {
    const PlanCandidate& a = plan.best[i];
    if (a.dp == 2 && a.microbatches == 1) ++dp_one_microbatch;
    for (size_t j = 0; j < i; ++j) {
      const PlanCandidate& b = plan.best[j];
      const bool same_layout = a.dp == b.dp && a.pp == b.pp &&
                               a.stages_per_rank == b.stages_per_rank &&
                               a.placement == b.placement && a.microbatches == b.microbatches &&
                               a.stage_starts == b.stage_starts;
      EXPECT_FALSE(same_layout && a.step_s == b.step_s && a.peak_bytes == b.peak_bytes)
          << a.label() << " repeats " << b.label();
    }
  }
  EXPECT_EQ(dp_one_microbatch, 1);
}

// Costs that do not shrink with the micro-batch (a fixed part) make many small
// micro-batches lose what they win in bubble: the plan follows the measured line.
TEST(Planner, FixedCostPerMicrobatchFavoursFewerMicrobatches) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  PlanRequest request = requestFor(2, registry);
  request.schedules = {"1f1b"};
  const Plan linear = planPipeline(uniformProfile(8, 64, 1e-3, 0), request, registry);
  const Plan fixed = planPipeline(uniformProfile(8, 64, 1e-3, 4e-3), request, registry);
  std::cout << "linear: " << linear.best[0].label() << ", fixed: " << fixed.best[0].label() << "\n";
  EXPECT_GT(linear.best[0].microbatches, fixed.best[0].microbatches);
}

TEST(Planner, KeepsEveryChoiceUnderTheMemoryBudget) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const CostProfile profile = uniformProfile(8, 32, 1e-3, 1e-4);
  const Plan free = planPipeline(profile, requestFor(2, registry, 100000), registry);
  double gpipe_peak = 0, smallest = 1e300;
  for (const PlanCandidate& c : free.best) {
    if (c.schedule == "gpipe" && c.microbatches >= 8)
      gpipe_peak = std::max(gpipe_peak, c.peak_bytes);
    smallest = std::min(smallest, c.peak_bytes);
  }
  // Between the smallest peak and GPipe's with 8 or more micro-batches.
  PlanRequest request = requestFor(2, registry, 100000);
  request.memory_budget_bytes = smallest + 0.25 * (gpipe_peak - smallest);
  const Plan budgeted = planPipeline(profile, request, registry);
  EXPECT_GT(budgeted.over_budget, 0);
  ASSERT_FALSE(budgeted.best.empty());
  for (const PlanCandidate& c : budgeted.best) {
    EXPECT_LE(c.peak_bytes, request.memory_budget_bytes) << c.label();
    EXPECT_FALSE(c.schedule == "gpipe" && c.microbatches >= 8) << c.label();
  }
  // A budget nothing fits names the smallest peak.
  request.memory_budget_bytes = smallest * 0.99;
  std::ostringstream want;
  want << "the smallest predicted peak per rank is " << smallest / (1024.0 * 1024.0) << " MB";
  EXPECT_NE(errorOf([&] { planPipeline(profile, request, registry); }).find(want.str()),
            std::string::npos)
      << want.str();
}

TEST(Planner, RefusesRanksWithoutALayoutAndSchedulesThatRefuseAll) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  // A batch of 3 and 2 units: dp cannot be 2 or 4, pp cannot be 4.
  EXPECT_NE(errorOf([&] {
              planPipeline(uniformProfile(2, 3), requestFor(4, registry), registry);
            }).find("--plan.ranks 4 cannot be laid out"),
            std::string::npos);
  ScheduleRegistry refusing;
  refusing.add("never", "refuses everything",
               [](const ScheduleRequest&) -> std::vector<ActionList> {
                 PPSTAGE_FAIL("the never schedule runs nothing");
               });
  const std::string error =
      errorOf([&] { planPipeline(uniformProfile(4, 8), requestFor(2, refusing), refusing); });
  EXPECT_NE(error.find("every candidate was refused by its schedule"), std::string::npos) << error;
  EXPECT_NE(error.find("the never schedule runs nothing"), std::string::npos) << error;
}

// A module called twice (one embedding for source and target) is named by its first call:
// no stage may start at the second, which a split point could not name.
TEST(Planner, StartsStagesOnlyWhereASplitPointCanName) {
  CostProfile profile = uniformProfile(6, 16, 1e-3, 1e-4);
  const std::vector<std::string> paths{"embed",     "encoder",   "embed",
                                       "decoder.0", "decoder.1", "head"};
  for (size_t u = 0; u < paths.size(); ++u) profile.units[u].path = paths[u];
  const ScheduleRegistry registry = makeScheduleRegistry();
  const Plan plan = planPipeline(profile, requestFor(2, registry, 100000), registry);
  ASSERT_FALSE(plan.best.empty());
  for (const PlanCandidate& c : plan.best) {
    for (size_t start : c.stage_starts) EXPECT_NE(start, 2u) << c.label();
    EXPECT_LE(c.stages(), 5) << c.label();  // five places a stage can start
  }
  for (size_t start : plan.default_config.stage_starts) EXPECT_NE(start, 2u);
}

// 64 ranks and 256 micro-batches: the enumeration stays a search, not a grid of
// simulations (docs/benchmarks.md times it).
TEST(Planner, PlansSixtyFourRanksAndTwoHundredFiftySixMicrobatches) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  const Plan plan =
      planPipeline(uniformProfile(128, 256, 1e-3, 1e-4), requestFor(64, registry), registry);
  std::cout << plan.candidates << " candidates, " << plan.simulated << " simulated; best "
            << plan.best[0].label() << "\n";
  EXPECT_GT(plan.candidates, 500);
  EXPECT_LT(plan.simulated, plan.candidates / 2);
  ASSERT_EQ(plan.best.size(), 10u);
  EXPECT_EQ(plan.best[0].dp * plan.best[0].pp, 64);
}

// --write-config: the user's options, less what the plan chose, plus the choice; what
// `train --config` parses into the same configuration applyCandidate makes.
// A job's own candidate (what balance by time cuts): its micro-batches as the run resolves
// them (twice the stages by default) and their size from a replica's share of the batch.
TEST(PlanConfig, CandidateOfAJobCutsItsBatchAsTheRunDoes) {
  Config config;
  config.train.batch_size = 8;
  PlanCandidate c = candidateOf(config, Topology::forJob(2, 1, 0, 1));
  EXPECT_EQ(c.pp, 2);
  EXPECT_EQ(c.microbatches, 4);
  EXPECT_EQ(c.microbatch_size, 2);
  config.train.dp = 2;
  c = candidateOf(config, Topology::forJob(4, 2, 0, 1));
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.microbatch_size, 1);
  config.train.batch_size = 6;
  EXPECT_NE(errorOf([&] {
              candidateOf(config, Topology::forJob(4, 2, 0, 1));
            }).find("is not divisible by --train.dp 2 x --pipeline.microbatches 4"),
            std::string::npos);
}

// `path` holding `ini`, parsed as `ppstage train --config path` parses it.
Config parsedAsTrain(const std::string& ini, const std::string& path) {
  {
    std::ofstream file(path);
    file << ini;
  }
  Config read;
  po::options_description options;
  addAllOptions(options, read);
  const std::string arg = "--config=" + path;
  const char* argv[] = {"train", arg.c_str()};
  std::ostringstream out;
  EXPECT_TRUE(parseOptions(2, argv, options, "", out));
  return read;
}

TEST(PlanConfig, WritesAConfigThatTrainReadsBack) {
  const CostProfile profile = uniformProfile(8, 16);
  PlanCandidate c;
  c.schedule = "zb-v";
  c.dp = 1;
  c.pp = 2;
  c.stages_per_rank = 2;
  c.placement = Placement::kV;
  c.microbatches = 8;
  c.stage_starts = {2, 4, 6};
  const std::map<std::string, std::string> given{
      {"model.layers", "8"},      {"pipeline.schedule", "1f1b"}, {"train.dp", "4"},
      {"train.optimizer", "sgd"}, {"plan.ranks", "2"},           {"json", "true"}};
  const std::string ini = configIniOf(given, c, profile, "a plan\nline two");
  EXPECT_EQ(ini.rfind("# a plan\n# line two\n", 0), 0u) << ini;
  EXPECT_EQ(ini.find("ranks"), std::string::npos) << ini;
  const Config read = parsedAsTrain(ini, testing::TempDir() + "ppstage_planned.ini");
  Config want;
  applyCandidate(c, profile, want);
  EXPECT_EQ(read.pipeline.schedule, "zb-v");
  EXPECT_EQ(read.pipeline.stages, want.pipeline.stages);
  EXPECT_EQ(read.pipeline.split_points,
            (std::vector<std::string>{"layers.2", "layers.4", "layers.6"}));
  EXPECT_EQ(read.pipeline.microbatches, 8);
  EXPECT_EQ(read.pipeline.stages_per_rank, 2);
  EXPECT_EQ(read.pipeline.placement, Placement::kV);
  EXPECT_EQ(read.train.dp, 1);
  EXPECT_EQ(read.train.optimizer, OptimizerKind::kSgd);
  EXPECT_EQ(read.model.layers, 8);
}

// With --train.tp 2 in the user's options, 8 ranks are 4 groups of 2: every candidate a
// plan keeps, and the default, lay out dp x pp = 4, and each config written of them is
// one train accepts on the 8 ranks (the layout, the micro-batches, the schedule). Planned
// as if tp were 1, they laid out 8 and train refused them.
TEST(PlanConfig, EveryCandidateWithTheUsersTpIsAConfigTrainAccepts) {
  CostProfile profile = uniformProfile(8, 16);
  profile.tp = 2;
  const ScheduleRegistry registry = makeScheduleRegistry();
  PlanConfig asked;
  asked.top = 100;
  const PlanRequest request = planRequestOf(asked, 8, 2, registry);
  EXPECT_EQ(request.ranks, 4);
  const Plan plan = planPipeline(profile, request, registry);
  std::vector<PlanCandidate> all = plan.best;
  ASSERT_GT(all.size(), 10u);
  all.push_back(plan.default_config);
  const std::map<std::string, std::string> given{
      {"model.layers", "8"}, {"train.tp", "2"}, {"train.dp", "8"}, {"train.batch_size", "16"}};
  const std::string path = testing::TempDir() + "ppstage_planned_tp.ini";
  for (const PlanCandidate& c : all) {
    EXPECT_EQ(c.dp * c.pp * c.tp, 8) << c.label();
    EXPECT_NE(c.label().find(" tp2 "), std::string::npos) << c.label();
    const Config read = parsedAsTrain(configIniOf(given, c, profile, "plan"), path);
    EXPECT_EQ(read.train.tp, 2);
    EXPECT_EQ(errorOf([&] { checkTrainable(read, 8); }), "(no error)") << c.label();
  }
  EXPECT_NE(errorOf([&] {
              planRequestOf(asked, 6, 4, registry);
            }).find("a plan of 6 ranks needs a number of ranks that --train.tp 4 divides"),
            std::string::npos);
  profile.tp = 1;
  EXPECT_NE(errorOf([&] { checkProfileTp(profile, 2, "costs.json"); })
                .find("cost profile 'costs.json' was measured with --train.tp 1; this plan has "
                      "--train.tp 2"),
            std::string::npos);
}

}  // namespace
}  // namespace ppstage
