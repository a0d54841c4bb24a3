// `ppstage plan`: measure the model's units once, then pick the pipeline configuration of
// P ranks with the fastest predicted step that fits the memory budget (plan/planner.h).
#include "commands.h"

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "ppstage/comm/link_probe.h"
#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/options.h"
#include "ppstage/core/allocator.h"
#include "ppstage/core/compute_threads.h"
#include "ppstage/core/file.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/train/job_plan.h"
#include "ppstage/train/unit_costs.h"
#include "run_command.h"

namespace ppstage::cli {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What the plan considers: --plan.schedules, or every registered schedule.
std::vector<std::string> schedulesToTry(const PlanConfig& plan, const ScheduleRegistry& registry) {
  if (plan.schedules.empty()) return registry.names();
  for (const std::string& name : plan.schedules) {
    if (registry.find(name) != nullptr) continue;
    std::string known;
    for (const std::string& n : registry.names()) known += (known.empty() ? "" : ", ") + n;
    PPSTAGE_FAIL("--plan.schedules names '", name, "', which is not a registered schedule (", known,
                 "; more with --pipeline.schedule_plugin)");
  }
  return plan.schedules;
}

// The profile to plan with: read from --plan.costs, or measured here (and saved with
// --plan.save_costs), with `links` as measured over `world` ranks (the [plan] figures
// without them).
CostProfile costProfileOf(const Config& config, int ranks, const std::optional<LinkCosts>& links,
                          int world) {
  if (!config.plan.costs.empty()) {
    return readCostProfile(readFile(config.plan.costs, "cost profile"), config.plan.costs);
  }
  setComputeThreads(computeThreads(config.train, ranks));
  CostProfile profile = measureCostProfile(config, ranks);
  if (links) {
    profile.link_latency_s = links->p2p_latency_s;
    profile.link_bytes_per_s = links->p2p_bytes_per_s;
    profile.allreduce_latency_s = links->allreduce_latency_s;
    profile.allreduce_bytes_per_s = links->allreduce_bytes_per_s;
    profile.links = "measured over " + std::to_string(world) + " ranks";
  }
  if (!config.plan.save_costs.empty()) {
    writeFileAtomically(config.plan.save_costs, costProfileToJson(profile));
  }
  return profile;
}

void writeConfig(const std::string& path, const std::map<std::string, std::string>& given,
                 const PlanCandidate& chosen, const CostProfile& profile,
                 const PlanRequest& request) {
  std::ostringstream header;
  header << "ppstage plan: " << chosen.label() << ", predicted step " << chosen.step_s
         << " s\nrun: mpirun -np " << request.ranks << " ppstage train --config " << path;
  writeFileAtomically(path, configIniOf(given, chosen, profile, header.str()));
}

nlohmann::json candidateJson(const PlanCandidate& c, const CostProfile& profile) {
  if (c.microbatches == 0) return nullptr;
  return {{"schedule", c.schedule},
          {"dp", c.dp},
          {"pp", c.pp},
          {"stages", c.stages()},
          {"stages_per_rank", c.stages_per_rank},
          {"placement", toString(c.placement)},
          {"microbatches", c.microbatches},
          {"microbatch_size", c.microbatch_size},
          {"split_points", splitPointsOf(c, profile)},
          {"predicted_step_s", c.step_s},
          {"makespan_s", c.makespan_s},
          {"tail_s", c.tail_s},
          {"tokens_per_s", c.tokens_per_s},
          {"peak_memory_mb", c.peak_bytes / 1e6},
          {"bubble", c.bubble}};
}

nlohmann::json planJson(const Plan& plan, const CostProfile& profile, const PlanConfig& config,
                        double measure_s, double plan_s) {
  nlohmann::json best = nlohmann::json::array();
  for (const PlanCandidate& c : plan.best) best.push_back(candidateJson(c, profile));
  return {{"ranks", config.ranks},
          {"memory_mb", config.memory_mb},
          {"model", profile.model},
          {"compile_mode", profile.compile_mode},
          {"batch_size", profile.batch_size},
          {"units", profile.units.size()},
          {"links", profile.links},
          {"measure_s", measure_s},
          {"plan_s", plan_s},
          {"candidates", plan.candidates},
          {"simulated", plan.simulated},
          {"refused", plan.refused},
          {"over_budget", plan.over_budget},
          {"chosen", candidateJson(plan.best.front(), profile)},
          {"default", candidateJson(plan.default_config, profile)},
          {"best", best}};
}

void printRow(const char* rank, const PlanCandidate& c, const CostProfile& profile) {
  std::string points;
  for (const std::string& p : splitPointsOf(c, profile)) points += (points.empty() ? "" : ",") + p;
  std::printf("%-4s %-16s %3d %3d %3d %-4s %4d %5lld %9.4f %11.0f %9.1f %6.3f  %s\n", rank,
              c.schedule.c_str(), c.dp, c.pp, c.stages_per_rank, toString(c.placement),
              c.microbatches, static_cast<long long>(c.microbatch_size), c.step_s, c.tokens_per_s,
              c.peak_bytes / 1e6, c.bubble, points.empty() ? "-" : points.c_str());
}

void printPlan(const Plan& plan, const CostProfile& profile, const PlanConfig& config,
               double measure_s, double plan_s) {
  std::printf(
      "plan for %lld ranks: %s (%s), batch %lld, %zu units; measured in %.1f s, "
      "planned in %.2f s\n",
      static_cast<long long>(config.ranks), profile.model.c_str(), profile.compile_mode.c_str(),
      static_cast<long long>(profile.batch_size), profile.units.size(), measure_s, plan_s);
  std::printf(
      "%lld candidates, %lld simulated, %lld refused by their schedule, %lld over the "
      "memory budget%s\n\n",
      static_cast<long long>(plan.candidates), static_cast<long long>(plan.simulated),
      static_cast<long long>(plan.refused), static_cast<long long>(plan.over_budget),
      config.memory_mb > 0 ? "" : " (none given)");
  std::printf("%-4s %-16s %3s %3s %3s %-4s %4s %5s %9s %11s %9s %6s  %s\n", "#", "schedule", "dp",
              "pp", "spr", "plc", "M", "mb", "step_s", "tokens/s", "peak_MB", "bubble",
              "split points");
  for (size_t i = 0; i < plan.best.size(); ++i) {
    printRow(std::to_string(i + 1).c_str(), plan.best[i], profile);
  }
  const PlanCandidate& chosen = plan.best.front();
  if (plan.default_config.microbatches > 0) {
    printRow("dflt", plan.default_config, profile);
    std::printf(
        "\nchosen: %s, predicted %.4f s a step, %.2fx the default (1f1b, M = 2 x "
        "stages, balanced by params)\n",
        chosen.label().c_str(), chosen.step_s, plan.default_config.step_s / chosen.step_s);
  } else {
    std::printf("\nchosen: %s, predicted %.4f s a step\n", chosen.label().c_str(), chosen.step_s);
  }
}

}  // namespace

int planMain(int argc, const char* const* argv) {
  Config config;
  bool json = false;
  std::string write_config;
  po::options_description options;
  addModelOptions(options, config.model);
  addTrainOptions(options, config.train);
  addTrainingLoopOptions(options, config.train);
  addCompileOptions(options, config.compile);
  addDataOptions(options, config.data);
  addSchedulePluginOption(options, config.pipeline);
  addPlanOptions(options, config.plan);
  po::options_description output("Output");
  output.add_options()("json", po::bool_switch(&json),
                       "print the plan as JSON (chosen, default, best: schedule, dp, pp, "
                       "stages_per_rank, placement, microbatches, split_points, "
                       "predicted_step_s, tokens_per_s, peak_memory_mb, bubble)")(
      "write-config", po::value(&write_config),
      "write the chosen configuration, with the options given here, as an INI file that "
      "`ppstage train --config` runs");
  options.add(output);
  const char* usage =
      "usage: ppstage plan [--config FILE] [options] --plan.ranks P [--plan.memory_mb M]\n"
      "           [--json] [--write-config OUT.ini]\n\n"
      "Measures every unit of the model once (F, B, I and W seconds and the activation\n"
      "bytes of one micro-batch, at two micro-batch sizes, in --compile.mode), then\n"
      "predicts every configuration of P ranks: dp x pp layouts, schedules, micro-batch\n"
      "counts, stages per rank 1-4 in a loop or a V, each with its best cut; the step by\n"
      "the schedule's simulator plus the optimizer and gradient all-reduce, the peak\n"
      "memory per rank from the simulated in-flight micro-batches. Prints the fastest that\n"
      "fit --plan.memory_mb, and the default 1f1b configuration beside them.";
  std::map<std::string, std::string> given;
  if (!parseOptions(argc, argv, options, usage, std::cout, nullptr, &given)) return 0;
  validate(config.model);
  validate(config.train);
  validate(config.compile);
  validate(config.data);
  validate(config.plan);
  const ScheduleRegistry registry = makeScheduleRegistry(config.pipeline.schedule_plugin);
  PlanRequest request;
  request.memory_budget_bytes = config.plan.memory_mb * 1e6;
  request.schedules = schedulesToTry(config.plan, registry);
  request.keep = static_cast<int>(config.plan.top);

  if (config.plan.costs.empty()) {
    keepFreedMemoryForReuse();   // as train does: the same allocator, the same costs
    installCountingAllocator();  // before the model's tensors
  }
  MpiSession mpi;
  return runCommand([&] {
    // Under mpirun every rank measures the links; rank 0 measures the model and plans.
    std::optional<LinkCosts> links;
    if (mpi.worldSize() >= 2 && config.plan.costs.empty()) {
      links = measureLinks(*MpiCommunicator::world());
    }
    if (mpi.worldRank() != 0) return 0;
    if (config.plan.ranks == 0 && mpi.worldSize() > 1) config.plan.ranks = mpi.worldSize();
    PPSTAGE_CHECK(config.plan.ranks >= 1,
                  "--plan.ranks must name the ranks to plan for (or run under mpirun -np P)");
    request.ranks = static_cast<int>(config.plan.ranks);
    Clock::time_point start = Clock::now();
    CostProfile profile = costProfileOf(config, request.ranks, links, mpi.worldSize());
    const double measure_s = secondsSince(start);
    start = Clock::now();
    const Plan plan = planPipeline(profile, request, registry);
    const double plan_s = secondsSince(start);
    if (!write_config.empty())
      writeConfig(write_config, given, plan.best.front(), profile, request);
    if (json) {
      std::cout << planJson(plan, profile, config.plan, measure_s, plan_s).dump(2) << std::endl;
    } else {
      printPlan(plan, profile, config.plan, measure_s, plan_s);
    }
    return 0;
  });
}

}  // namespace ppstage::cli
