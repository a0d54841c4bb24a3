// The splitter end to end: model source -> capture -> plan -> extract, as `ppstage split`
// and the runtime use it.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"
#include "ppstage/models/model_source.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/split/stage_plan.h"

namespace ppstage {

// Wall time of each step of splitModel(), in seconds.
struct SplitTimings {
  double load_s = 0;     // build the built-in model or load the file
  double capture_s = 0;  // inline, lift, simplify
  double shapes_s = 0;   // run the example input once
  double plan_s = 0;     // units and balance
  double extract_s = 0;  // stage graphs and parameter copies
};

struct ModelSplit {
  LoadedModel model;
  ModelGraph graph;
  at::Tensor example_input;  // (train.batch_size, ...): what the plan's shapes are for
  StagePlan plan;
  std::vector<StageModule> stages;
  std::vector<TiedParameter> ties;
  SplitTimings timings;
};

// Loads (or builds) the model of `config`, captures it and cuts it into stages. Balancing
// by time uses `unit_seconds` when given (what every rank of a job agreed on), else
// measures here. Throws ppstage::Error for anything the user can fix.
ModelSplit splitModel(const Config& config, const UnitSeconds* unit_seconds = nullptr);

// --pipeline.balance time: load, capture and measure every unit of `config`'s model on its
// micro-batch, the training loss included (measureUnitSeconds), without planning.
UnitSeconds measureUnitSeconds(const Config& config);

}  // namespace ppstage
