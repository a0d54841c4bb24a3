// ModelGraph: a model's forward as one flat, functional TorchScript graph.
//
// graph::capture turns a torch::jit::Module into it: every method and function call is
// inlined, every parameter and buffer becomes a graph input, every other module attribute
// a constant, and every node remembers which module call it came from ("layers.3.attn").
//
//   graph(%input_0, ..., %input_{I-1}, %param_0, ..., %param_{P-1})
//       -> (%output_0, ..., %output_{K-1})
//
// The splitter reads nothing but this: no model attribute names, no `model.layers`.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace torch::jit {
struct Block;
struct Graph;
struct Node;
struct Value;
}  // namespace torch::jit

namespace ppstage {

// One inlined call of a module's method. Calls form a tree rooted at the model itself.
struct ModuleCall {
  std::string path;       // module path: "layers.3.attn"; "" for the model itself
  std::string type_name;  // class of the module: "__torch__.ppstage.CausalSelfAttention"
  int parent = -1;        // index of the calling call in ModelGraph::calls; -1 for the root
};

// A parameter or buffer lifted to a graph input.
struct ModelParameter {
  std::string path;          // "layers.3.attn.qkv.weight"
  at::Tensor value;          // the module's own tensor (not a copy)
  bool is_parameter = true;  // false: a buffer or a plain tensor attribute (no gradient)
  int tie_group = -1;        // index into ModelGraph::ties when the tensor has several paths
  // An int64 scalar naming a module call for its random ops, not state of the model:
  // "<call path>#random_key" (see Note [Keyed random ops] in src/graph/keyed_random.cpp).
  bool random_key = false;
};

struct ModelGraph {
  // inputs: [data inputs..., parameters[0], parameters[1], ...]; outputs: the model's
  // tensor outputs, tuples flattened.
  std::shared_ptr<torch::jit::Graph> graph;
  // The forward arguments fed with data, in forward's order ("input_ids", "attention_mask"):
  // graph inputs 0 .. I-1. Parameters follow them.
  std::vector<std::string> input_names;
  std::vector<ModelParameter> parameters;  // one per attribute path, in order of first use
  // Groups of indices into `parameters` whose paths hold one tensor (tied weights, such as
  // an embedding shared with the LM head). Each group has at least two entries.
  std::vector<std::vector<int>> ties;
  std::vector<ModuleCall> calls;  // calls[0] is the root call (the model's forward)
  // The innermost module call each node was inlined from; nodes not listed belong to the
  // root. Keys are nodes of `graph` (at any block depth).
  std::unordered_map<const torch::jit::Node*, int> node_call;

  static constexpr int kRootCall = 0;
  size_t numInputs() const { return input_names.size(); }
  // Graph input of `parameters[p]`.
  torch::jit::Value* parameterInput(size_t p) const;
  int callOf(const torch::jit::Node* node) const;
  const std::string& modulePathOf(const torch::jit::Node* node) const;
  // True when call `ancestor` is `call` or one of its callers.
  bool isWithin(int call, int ancestor) const;
  // Elements of the model's trainable parameters, a tensor with several paths counted once.
  int64_t numTrainableParams() const;
};

// The tensors fed to a model's inputs, for messages: "int64 [2, 16]" for one input,
// "input_ids int64 [2, 16], attention_mask int64 [2, 16]" for several.
std::string inputsText(const std::vector<std::string>& names,
                       const std::vector<at::Tensor>& tensors);

// The node in `top`'s own list that holds `node`: the node itself, or the control-flow node
// (prim::If, prim::Loop) it is nested in. `node` must lie inside `top`.
torch::jit::Node* topLevelNodeOf(torch::jit::Node* node, const torch::jit::Block* top);

}  // namespace ppstage
