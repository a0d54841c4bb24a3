// See include/ppstage/graph/value_shapes.h.
//
// The probe is a copy of the model graph that returns, instead of each tensor, its sizes
// and dtype. It runs without autograd, so no activation outlives its last use and the
// probe costs what one inference forward costs. requires_grad is then propagated
// statically: a floating-point result of an op with an input that requires grad requires
// grad, except through ops that cut the tape (detach).
#include "ppstage/graph/value_shapes.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/ir/ir.h>

#include "ppstage/graph/graph_runner.h"

namespace ppstage {

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

namespace {

using torch::jit::Node;
using torch::jit::Value;

bool isTensor(const Value* value) { return value->type()->isSubtypeOf(*c10::TensorType::get()); }

bool isIntOrIntList(const Value* value) {
  return value->type()->kind() == c10::TypeKind::IntType ||
         value->type()->isSubtypeOf(*c10::ListType::ofInts());
}

bool cutsTheTape(const Node* node) {
  static const c10::Symbol detach = c10::Symbol::fromQualString("aten::detach");
  return node->kind() == detach;
}

// True when `node` or a node nested in it reads a value that requires grad.
bool readsGrad(const Node* node, const ValueShapes& shapes) {
  for (const Value* input : node->inputs()) {
    const auto it = shapes.find(input);
    if (it != shapes.end() && it->second.requires_grad) return true;
  }
  for (const torch::jit::Block* block : node->blocks()) {
    for (const Node* inner : block->nodes()) {
      if (readsGrad(inner, shapes)) return true;
    }
  }
  return false;
}

struct Probe {
  std::shared_ptr<torch::jit::Graph> graph = std::make_shared<torch::jit::Graph>();
  // Per model value, in output order: a tensor adds two outputs (sizes, dtype), an int or
  // List[int] one (itself).
  std::vector<const Value*> probed;
};

Probe buildProbe(torch::jit::Graph& model) {
  Probe probe;
  torch::jit::Graph& g = *probe.graph;
  std::unordered_map<Value*, Value*> copy_of;
  for (Value* in : model.inputs()) copy_of[in] = g.addInput()->copyMetadata(in);
  for (Node* node : model.nodes()) {
    Node* clone = g.appendNode(g.createClone(node, [&](Value* v) { return copy_of.at(v); }));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      Value* original = node->output(i);
      Value* value = clone->output(i);
      copy_of[original] = value;
      if (isTensor(original)) {
        probe.probed.push_back(original);
        g.registerOutput(g.insert(c10::aten::size, {value}));
        g.registerOutput(g.insert(c10::prim::dtype, {value}));
      } else if (isIntOrIntList(original)) {
        probe.probed.push_back(original);
        g.registerOutput(value);
      }
    }
  }
  return probe;
}

}  // namespace

ValueShapes recordValueShapes(const ModelGraph& model, const at::Tensor& input) {
  ValueShapes shapes;
  std::vector<c10::IValue> inputs{input};
  for (const ModelParameter& p : model.parameters) inputs.emplace_back(p.value);
  const auto graph_inputs = model.graph->inputs();
  for (size_t i = 0; i < graph_inputs.size(); ++i) {
    const at::Tensor& t = inputs[i].toTensor();
    shapes[graph_inputs[i]] = TensorMeta{t.sizes().vec(), t.scalar_type(), t.requires_grad()};
  }

  const Probe probe = buildProbe(*model.graph);
  std::vector<c10::IValue> outputs;
  {
    at::NoGradGuard no_grad;
    outputs = GraphRunner(probe.graph, "value_shapes").run(inputs);
  }
  size_t next = 0;
  for (const Value* value : probe.probed) {
    const c10::IValue& out = outputs[next++];
    if (isTensor(value)) {
      const auto dtype = static_cast<at::ScalarType>(outputs[next++].toInt());
      shapes[value] = TensorMeta{out.toIntVector(), dtype, false};
    } else if (out.isInt()) {
      shapes[value] = TensorMeta{{}, at::kLong, false};  // crosses as a 0-dim int64 tensor
    } else {
      shapes[value] = TensorMeta{{static_cast<int64_t>(out.toIntList().size())}, at::kLong, false};
    }
  }
  for (const Node* node : model.graph->nodes()) {
    if (cutsTheTape(node) || !readsGrad(node, shapes)) continue;
    for (const Value* output : node->outputs()) {
      auto it = shapes.find(output);
      if (it != shapes.end() && isTensor(output) &&
          (at::isFloatingType(it->second.dtype) || at::isComplexType(it->second.dtype))) {
        it->second.requires_grad = true;
      }
    }
  }
  return shapes;
}

}  // namespace ppstage
