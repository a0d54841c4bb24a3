// A model captured and cut into stages in one process, as the compile, I/W split and
// recomputation tests run it: the stages' graphs, their parameters, the model's graph.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "ppstage/graph/model_graph.h"
#include "ppstage/models/model_source.h"
#include "ppstage/split/stage_module.h"

namespace ppstage::test {

struct SplitModel {
  LoadedModel model;
  ModelGraph graph;
  std::vector<StageModule> stages;
};

// `model` captured and cut into `stages` balanced stages, its value shapes recorded at
// `batch` samples.
SplitModel splitModel(LoadedModel model, int stages, int64_t batch);

// The stage's parameters that train: what a backward's W computes gradients for.
std::vector<at::Tensor> trainableWeights(const StageModule& stage);

}  // namespace ppstage::test
