// See split_model.h.
#include "support/split_model.h"

#include "ppstage/graph/capture.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/split/stage_partition.h"

namespace ppstage::test {

SplitModel splitModel(LoadedModel model, int stages, int64_t batch) {
  SplitModel s{std::move(model), {}, {}};
  s.graph = captureModel(s.model.module);
  const ValueShapes shapes = recordValueShapes(
      s.graph, [&](int64_t b) { return makeExampleInputs(s.model.input, b, 0); }, batch);
  PipelineConfig pipeline;
  pipeline.stages = stages;
  s.stages = extractStages(s.graph, partitionStages(s.graph, shapes, pipeline), shapes);
  return s;
}

std::vector<at::Tensor> trainableWeights(const StageModule& stage) {
  std::vector<at::Tensor> weights;
  for (const StageParameter& p : stage.parameters) {
    if (p.is_parameter && p.value.requires_grad()) weights.push_back(p.value);
  }
  return weights;
}

}  // namespace ppstage::test
