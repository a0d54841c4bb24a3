// `ppstage split`: cut a model into pipeline stages and print the plan.
#include "commands.h"

#include <boost/program_options.hpp>

#include <iostream>

#include "ppstage/config/options.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/plan_report.h"
#include "ppstage/train/time_balance.h"

namespace ppstage::cli {

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
      "--train.batch_size), then the parameters tied across stages.";
  if (!parseOptions(argc, argv, options, usage, std::cout)) return 0;
  validate(config.model);
  validate(config.pipeline);
  validate(config.train);

  const ModelSplit split = splitModelMeasuringTime(config);
  if (json) {
    std::cout << planToJson(split) << std::endl;
  } else {
    printPlanTable(std::cout, split);
  }
  return 0;
}

}  // namespace ppstage::cli
