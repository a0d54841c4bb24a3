// See include/ppstage/graph/device_constants.h.
#include "ppstage/graph/device_constants.h"

#include <torch/csrc/jit/ir/constants.h>

#include <vector>

namespace ppstage {
namespace {

void moveIn(torch::jit::Block* block, const at::Device& device, DeviceConstants& moved) {
  std::vector<torch::jit::Node*> constants;
  for (torch::jit::Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) moveIn(sub, device, moved);
    if (node->kind() == c10::prim::Constant) constants.push_back(node);
  }
  for (torch::jit::Node* node : constants) {
    const std::optional<c10::IValue> value = torch::jit::toIValue(node->output());
    if (!value) continue;
    c10::IValue replacement;
    if (value->isDevice() && value->toDevice() != device) {
      replacement = device;
      ++moved.devices;
    } else if (value->isTensor() && value->toTensor().defined() && value->toTensor().dim() > 0 &&
               value->toTensor().device() != device) {
      replacement = value->toTensor().to(device);
      ++moved.tensors;
    } else {
      continue;
    }
    torch::jit::WithInsertPoint here(node);
    // The new constant's own type: a moved tensor's says its device, which the profiling
    // executor and the fuser read.
    torch::jit::Value* constant = node->owningGraph()->insertConstant(replacement);
    node->output()->replaceAllUsesWith(constant);
    node->destroy();
  }
}

}  // namespace

DeviceConstants moveConstantsTo(torch::jit::Graph& graph, const at::Device& device) {
  DeviceConstants moved;
  moveIn(graph.block(), device, moved);
  return moved;
}

}  // namespace ppstage
