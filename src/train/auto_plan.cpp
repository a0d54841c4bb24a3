// See include/ppstage/train/auto_plan.h.
#include "ppstage/train/auto_plan.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <ostream>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/train/job_plan.h"
#include "ppstage/train/unit_costs.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

void checkPlannable(const Config& config, int world) {
  PPSTAGE_CHECK(config.plan.ranks == 0 || config.plan.ranks == world,
                "--pipeline.auto plans for the job's ", world, " ranks; --plan.ranks is ",
                config.plan.ranks);
  PPSTAGE_CHECK(config.train.tp == 1, "--pipeline.auto plans pp x dp; it does not choose ",
                "tensor parallelism (--train.tp ", config.train.tp, ")");
}

// The profile every rank plans with: read from --plan.costs, or measured on every rank
// (measureCostProfileOnRanks). The same on every rank.
CostProfile agreedProfile(const Config& config, Communicator& world) {
  runAgreed(world, [&] { checkPlannable(config, world.size()); });
  if (config.plan.costs.empty()) {
    CostProfile profile = measureCostProfileOnRanks(config, world.size(), &world);
    if (world.rank() == 0 && !config.plan.save_costs.empty()) {
      writeFileAtomically(config.plan.save_costs, costProfileToJson(profile));
    }
    return profile;
  }
  std::optional<CostProfile> profile;
  runAgreed(world, [&] {
    profile = readCostProfile(readFile(config.plan.costs, "cost profile"), config.plan.costs);
    PPSTAGE_CHECK(
        profile->batch_size == config.train.batch_size && profile->model == config.model.name,
        "cost profile '", config.plan.costs, "' was measured for --model.name '", profile->model,
        "' with a batch of ", profile->batch_size, "; this run has '", config.model.name, "' and ",
        config.train.batch_size);
  });
  return *profile;
}

void logChoice(std::ostream& log, const Plan& plan, double measure_s, double plan_s) {
  const PlanCandidate& c = plan.best.front();
  char line[512];
  std::snprintf(line, sizeof line,
                "pipeline.auto: %s, predicted step %.4f s (%.0f tokens/s, peak %.1f MB per "
                "rank, bubble %.3f): the fastest of %lld candidates (%lld simulated, %lld over "
                "the memory budget); measured in %.1f s, planned in %.2f s\n",
                c.label().c_str(), c.step_s, c.tokens_per_s, c.peak_bytes / kBytesPerMB, c.bubble,
                static_cast<long long>(plan.candidates), static_cast<long long>(plan.simulated),
                static_cast<long long>(plan.over_budget), measure_s, plan_s);
  log << line;
  if (plan.default_config.microbatches == 0) return;
  const PlanCandidate& d = plan.default_config;
  std::snprintf(line, sizeof line,
                "pipeline.auto: the default (%s, balanced by params) predicts %.4f s: %.2fx "
                "slower\n",
                d.label().c_str(), d.step_s, d.step_s / c.step_s);
  log << line;
}

}  // namespace

void planAutomatically(Config& config, Communicator& world, std::ostream& log) {
  const Clock::time_point start = Clock::now();
  const CostProfile profile = agreedProfile(config, world);
  const double measure_s = secondsSince(start);
  std::optional<Plan> plan;
  const Clock::time_point planning = Clock::now();
  runAgreed(world, [&] {
    const ScheduleRegistry registry = makeScheduleRegistry(config.pipeline.schedule_plugin);
    PlanRequest request = planRequestOf(config.plan, world.size(), registry);
    request.keep = 1;
    plan = planPipeline(profile, request, registry);
  });
  const double plan_s = secondsSince(planning);
  applyCandidate(plan->best.front(), profile, config);
  if (world.rank() == 0) logChoice(log, *plan, measure_s, plan_s);
}

}  // namespace ppstage
