// `ppstage split`: cut a model into pipeline stages and print the plan.
#include "commands.h"

#include <boost/program_options.hpp>

#include <iostream>

#include <nlohmann/json.hpp>

#include "ppstage/config/options.h"
#include "ppstage/parallel/tensor_parallel.h"
#include "ppstage/parallel/tp_group.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/plan_report.h"
#include "ppstage/train/time_balance.h"

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

}  // namespace

int splitMain(int argc, const char* const* argv) {
  Config config;
  bool json = false;
  po::options_description options;
  addModelOptions(options, config.model);
  addStageCountOption(options, config.pipeline);
  addSplitOptions(options, config.pipeline);
  addTrainOptions(options, config.train);
  po::options_description output("Output");
  output.add_options()("json", po::bool_switch(&json),
                       "print the plan as JSON (stages with index, modules, num_params, "
                       "inputs, outputs; tied_parameters)");
  options.add(output);
  const char* usage =
      "usage: ppstage split [--config FILE] [options] [--json]\n\n"
      "Captures the model's graph, cuts it into stages at --pipeline.split_points or\n"
      "balanced by --pipeline.balance, and prints per stage its modules, parameter count,\n"
      "estimated FLOPs and the tensors crossing its boundaries (shapes for\n"
      "--train.batch_size), then the parameters tied across stages. With --train.tp N,\n"
      "the regions tensor parallelism shards in each stage (and why the others stay\n"
      "replicated), the parameters sharded, and the all-reduces per micro-batch.";
  if (!parseOptions(argc, argv, options, usage, std::cout)) return 0;
  validate(config.model);
  validate(config.pipeline);
  validate(config.train);

  ModelSplit split = splitModelMeasuringTime(config);
  // --train.tp: what the tensor-parallel pass makes of each stage, as its first rank holds it.
  std::vector<TpStageReport> tp_reports;
  if (config.train.tp > 1) {
    const TpGroup group(0, static_cast<int>(config.train.tp));
    for (StageModule& stage : split.stages) {
      tp_reports.push_back(shardStage(stage, split.graph, group));
    }
  }
  if (json) {
    nlohmann::json plan = nlohmann::json::parse(planToJson(split));
    if (!tp_reports.empty())
      plan["tensor_parallel"] = tensorParallelJson(config.train.tp, tp_reports);
    std::cout << plan.dump(2) << std::endl;
    return 0;
  }
  printPlanTable(std::cout, split);
  if (tp_reports.empty()) return 0;
  std::cout << "\ntensor parallelism: tp " << config.train.tp
            << " (regions found in each stage's graph; parameter counts of the whole model)\n";
  for (const TpStageReport& report : tp_reports) {
    std::cout << "stage " << report.stage << ": " << summarizeRegions(report) << "\n";
    for (const std::string& line : describeRegions(report)) std::cout << "  " << line << "\n";
  }
  return 0;
}

}  // namespace ppstage::cli
