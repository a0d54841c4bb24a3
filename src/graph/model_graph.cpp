// See include/ppstage/graph/model_graph.h.
#include "ppstage/graph/model_graph.h"

#include <torch/csrc/jit/ir/ir.h>

#include <set>

#include "ppstage/core/text.h"

namespace ppstage {

using torch::jit::Node;

Node* topLevelNodeOf(Node* node, const torch::jit::Block* top) {
  while (node->owningBlock() != top) node = node->owningBlock()->owningNode();
  return node;
}

std::string inputsText(const std::vector<std::string>& names,
                       const std::vector<at::Tensor>& tensors) {
  std::vector<std::string> items;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string tensor =
        dtypeName(tensors[i].scalar_type()) + " " + shapeText(tensors[i].sizes().vec());
    items.push_back(tensors.size() == 1 || i >= names.size() ? tensor : names[i] + " " + tensor);
  }
  return joinText(items, ", ");
}

torch::jit::Value* ModelGraph::parameterInput(size_t p) const {
  return graph->inputs()[numInputs() + p];
}

int ModelGraph::callOf(const Node* node) const {
  const auto it = node_call.find(node);
  return it == node_call.end() ? kRootCall : it->second;
}

const std::string& ModelGraph::modulePathOf(const Node* node) const {
  return calls[callOf(node)].path;
}

bool ModelGraph::isWithin(int call, int ancestor) const {
  for (int c = call; c >= 0; c = calls[c].parent) {
    if (c == ancestor) return true;
  }
  return false;
}

int64_t ModelGraph::numTrainableParams() const {
  std::set<const c10::TensorImpl*> seen;
  int64_t total = 0;
  for (const ModelParameter& p : parameters) {
    if (p.is_parameter && seen.insert(p.value.unsafeGetTensorImpl()).second) {
      total += p.value.numel();
    }
  }
  return total;
}

}  // namespace ppstage
