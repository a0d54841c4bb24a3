// See include/ppstage/graph/value_shapes.h.
#include "ppstage/graph/value_shapes.h"

#include <torch/csrc/jit/ir/ir.h>

#include "ppstage/graph/graph_runner.h"

namespace ppstage {

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

namespace {

bool isTensor(const torch::jit::Value* value) {
  return value->type()->isSubtypeOf(*c10::TensorType::get());
}

bool isIntOrIntList(const torch::jit::Value* value) {
  return value->type()->kind() == c10::TypeKind::IntType ||
         value->type()->isSubtypeOf(*c10::ListType::ofInts());
}

// An int as a 0-dim int64 tensor, a List[int] as a 1-dim one: how they cross a cut.
TensorMeta metaOf(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return TensorMeta{t.sizes().vec(), t.scalar_type(), t.requires_grad()};
  }
  if (value.isInt()) return TensorMeta{{}, at::kLong, false};
  return TensorMeta{{static_cast<int64_t>(value.toIntList().size())}, at::kLong, false};
}

}  // namespace

ValueShapes recordValueShapes(const ModelGraph& model, const at::Tensor& input) {
  // A copy of the graph that also returns every top-level tensor value.
  std::unordered_map<torch::jit::Value*, torch::jit::Value*> copy_of;
  auto probe = std::make_shared<torch::jit::Graph>();
  for (torch::jit::Value* in : model.graph->inputs()) {
    copy_of[in] = probe->addInput()->copyMetadata(in);
  }
  std::vector<const torch::jit::Value*> probed;
  for (torch::jit::Node* node : model.graph->nodes()) {
    torch::jit::Node* clone =
        probe->appendNode(probe->createClone(node, [&](torch::jit::Value* v) { return copy_of.at(v); }));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      copy_of[node->output(i)] = clone->output(i);
      if (isTensor(node->output(i)) || isIntOrIntList(node->output(i))) {
        probed.push_back(node->output(i));
        probe->registerOutput(clone->output(i));
      }
    }
  }

  std::vector<c10::IValue> inputs{input};
  for (const ModelParameter& p : model.parameters) inputs.emplace_back(p.value);
  ValueShapes shapes;
  const auto graph_inputs = model.graph->inputs();
  for (size_t i = 0; i < graph_inputs.size(); ++i) {
    shapes[graph_inputs[i]] = metaOf(inputs[i]);
  }
  const std::vector<c10::IValue> outputs = GraphRunner(probe, "value_shapes").run(inputs);
  for (size_t i = 0; i < probed.size(); ++i) {
    if (outputs[i].isTensor() || outputs[i].isInt() || outputs[i].isIntList()) {
      shapes[probed[i]] = metaOf(outputs[i]);
    }
  }
  return shapes;
}

}  // namespace ppstage
