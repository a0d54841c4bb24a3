// `ppstage split`: cut a model into pipeline stages and print the plan.
#include "commands.h"

#include <boost/program_options.hpp>

#include <algorithm>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "ppstage/compile/model_compiler.h"
#include "ppstage/config/options.h"
#include "ppstage/parallel/tensor_parallel.h"
#include "ppstage/parallel/tp_group.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/plan_report.h"
#include "ppstage/train/auto_plan.h"
#include "ppstage/train/captured_run.h"

namespace ppstage::cli {

namespace {

// {"tp": N, "stages": [{"stage", "regions": [{"module", "sharded", "why", "column", "row"}],
// "sharded_params", "replicated_params", "forward_all_reduces", "backward_all_reduces"}]}
nlohmann::json tensorParallelJson(int64_t tp, const std::vector<TpStageReport>& reports) {
  nlohmann::json stages = nlohmann::json::array();
  for (const TpStageReport& report : reports) {
    nlohmann::json regions = nlohmann::json::array();
    for (const TpRegion& r : report.regions) {
      regions.push_back({{"module", r.module},
                         {"sharded", r.sharded},
                         {"why", r.why},
                         {"column", r.column},
                         {"row", r.row}});
    }
    stages.push_back({{"stage", report.stage},
                      {"regions", regions},
                      {"sharded_params", report.sharded_elements},
                      {"replicated_params", report.replicated_elements},
                      {"forward_all_reduces", report.forward_all_reduces},
                      {"backward_all_reduces", report.backward_all_reduces}});
  }
  return {{"tp", tp}, {"stages", stages}};
}

// The ranks of a job of `config`'s stages: one pipeline rank per --pipeline.stages_per_rank
// stages, times the replicas and the tensor-parallel ranks.
int jobRanks(const Config& config) {
  const int64_t stages = std::max<int64_t>(config.pipeline.stages, 1);
  const int64_t pp = std::max<int64_t>(stages / config.pipeline.stages_per_rank, 1);
  return static_cast<int>(pp * config.train.dp * config.train.tp);
}

// {"schedule", "dp", "pp", "stages_per_rank", "microbatches", "split_points",
// "predicted_step_s", "params_predicted_step_s", "costs"}
nlohmann::json timeCutJson(const TimeCut& cut) {
  const PlanCandidate& c = cut.chosen;
  return {{"schedule", c.schedule},
          {"dp", c.dp},
          {"pp", c.pp},
          {"stages_per_rank", c.stages_per_rank},
          {"microbatches", c.microbatches},
          {"split_points", cut.split_points},
          {"predicted_step_s", c.step_s},
          {"params_predicted_step_s", cut.params_step_s},
          {"costs", cut.costs}};
}

// With --train.tp: what the tensor-parallel pass makes of each stage, as its first rank holds it.
std::vector<TpStageReport> tensorParallelReports(ModelSplit& split, int64_t tp) {
  std::vector<TpStageReport> reports;
  if (tp > 1) {
    const TpGroup group(0, static_cast<int>(tp));
    for (StageModule& stage : split.stages) {
      reports.push_back(shardStage(stage, split.graph, group));
    }
  }
  return reports;
}

// With --train.recompute: the blocks each stage recomputes, as train compiles them
// ({"policy", "stages": [{"stage", "blocks"}]}).
nlohmann::json recomputeJson(const Config& config, const ModelSplit& split) {
  const ModelCompiler compiler(config.compile, split.graph, 0, config.train.recompute,
                               config.train.recompute_blocks);
  nlohmann::json stages = nlohmann::json::array();
  for (const StageModule& stage : split.stages) {
    stages.push_back({{"stage", stage.index},
                      {"blocks", compiler.recomputedBlocks(*stage.graph, stage.inputs.size(),
                                                           stage.node_call, stage.index)}});
  }
  return {{"policy", toString(config.train.recompute)}, {"stages", stages}};
}

void printRecompute(const nlohmann::json& recompute) {
  std::cout << "\nactivation recomputation: " << recompute["policy"].get<std::string>() << "\n";
  for (const nlohmann::json& stage : recompute["stages"]) {
    const auto blocks = stage["blocks"].get<std::vector<std::string>>();
    std::cout << "stage " << stage["stage"].get<int>() << ": " << blocks.size() << " block"
              << (blocks.size() == 1 ? "" : "s");
    for (size_t i = 0; i < blocks.size(); ++i) std::cout << (i == 0 ? " (" : ", ") << blocks[i];
    std::cout << (blocks.empty() ? "" : ")") << "\n";
  }
}

// Prints the tensor-parallel regions of each stage, after the plan's table.
void printTensorParallel(int64_t tp, const std::vector<TpStageReport>& reports) {
  std::cout << "\ntensor parallelism: tp " << tp
            << " (regions found in each stage's graph; parameter counts of the whole model)\n";
  for (const TpStageReport& report : reports) {
    std::cout << "stage " << report.stage << ": " << summarizeRegions(report) << "\n";
    for (const std::string& line : describeRegions(report)) std::cout << "  " << line << "\n";
  }
}

const char* const kUsage =
    "usage: ppstage split [--config FILE] [options] [--json]\n\n"
    "Captures the model's graph, cuts it into stages at --pipeline.split_points or\n"
    "balanced by --pipeline.balance, and prints per stage its modules, parameter count,\n"
    "estimated FLOPs and the tensors crossing its boundaries (shapes for\n"
    "--train.batch_size), then the parameters tied across stages. With --train.tp N,\n"
    "the regions tensor parallelism shards in each stage (and why the others stay\n"
    "replicated), the parameters sharded, and the all-reduces per micro-batch. With\n"
    "--train.recompute, the blocks each stage recomputes.\n\n"
    "--pipeline.balance time measures the model's units in this process, in\n"
    "--compile.mode, as `ppstage plan` does, and takes the planner's cut for the job's\n"
    "schedule, micro-batches and layout (--pipeline.stages / --pipeline.stages_per_rank\n"
    "pipeline ranks, times --train.dp and --train.tp); it prints the predicted step.";

}  // namespace

int splitMain(int argc, const char* const* argv) {
  Config config;
  bool json = false;
  po::options_description options;
  addModelOptions(options, config.model);
  addStageCountOption(options, config.pipeline);
  addSplitOptions(options, config.pipeline);
  addScheduleOptions(options, config.pipeline);
  addTrainOptions(options, config.train);
  addCompileOptions(options, config.compile);
  addDataOptions(options, config.data);
  po::options_description output("Output");
  output.add_options()("json", po::bool_switch(&json),
                       "print the plan as JSON (stages with index, modules, num_params, "
                       "inputs, outputs; tied_parameters; with --train.recompute, recompute: "
                       "{policy, stages: [{stage, blocks}]})");
  options.add(output);
  if (!parseOptions(argc, argv, options, kUsage, std::cout)) return 0;
  validate(config.model);
  validate(config.pipeline);
  validate(config.train);
  validate(config.compile);
  validate(config.data);

  CapturedRun run = captureRun(config);
  std::optional<TimeCut> time_cut;
  if (balancesByTime(config.pipeline)) {
    time_cut = cutByTime(config, run, jobRanks(config), nullptr);
  }
  ModelSplit split = splitCaptured(std::move(run.model), config.pipeline);
  if (time_cut) split.partition.method = "time";  // its split points are the time cut
  const std::vector<TpStageReport> tp_reports = tensorParallelReports(split, config.train.tp);
  const bool recomputes = config.train.recompute != RecomputePolicy::kNone;
  const nlohmann::json recompute = recomputes ? recomputeJson(config, split) : nlohmann::json();
  if (json) {
    nlohmann::json plan = nlohmann::json::parse(planToJson(split));
    if (!tp_reports.empty())
      plan["tensor_parallel"] = tensorParallelJson(config.train.tp, tp_reports);
    if (time_cut) plan["time_balance"] = timeCutJson(*time_cut);
    if (recomputes) plan["recompute"] = recompute;
    std::cout << plan.dump(2) << std::endl;
    return 0;
  }
  if (time_cut) std::cout << timeCutText(*time_cut) << "\n";
  printPlanTable(std::cout, split);
  if (!tp_reports.empty()) printTensorParallel(config.train.tp, tp_reports);
  if (recomputes) printRecompute(recompute);
  return 0;
}

}  // namespace ppstage::cli
