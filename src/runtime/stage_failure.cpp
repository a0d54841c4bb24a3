// See stage_failure.h.
#include "stage_failure.h"

#include "ppstage/graph/model_failure.h"
#include "ppstage/split/stage_module.h"

namespace ppstage {

std::string describeStageFailure(const LocalStage& stage, const std::vector<c10::IValue>& args,
                                 const std::exception& e) {
  const std::string message = errorMessage(e);
  const torch::jit::Node* node = findFailingNode(*stage.module->graph, args);
  std::string path;
  const auto call =
      node != nullptr ? stage.module->node_call.find(node) : stage.module->node_call.end();
  if (call != stage.module->node_call.end() &&
      static_cast<size_t>(call->second) < stage.call_paths.size()) {
    path = stage.call_paths[static_cast<size_t>(call->second)];
  }
  return describeFailure(message, node, path);
}

}  // namespace ppstage
