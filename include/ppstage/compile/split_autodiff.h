// Compiled graphs differentiated ahead of time, their backward cut in two: the gradients
// of a graph's activations (I) and those of its weights (W). What compile modes stage and
// block run when autograd records. See Note [Compiled backward and the I/W split] in
// src/compile/split_autodiff.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
}  // namespace torch::jit

namespace ppstage {

// How a graph's inputs enter autograd: whether each requires grad (as the tensors of the
// first call do; a change compiles again), and whether it is a weight (a parameter of the
// stage: its gradient is W's) rather than an activation (I's). One entry per graph input.
struct AutodiffInputs {
  std::vector<bool> requires_grad;
  std::vector<bool> weight;
};

// `graph` (a stage's or a segment's; left unchanged) rewritten so that each of its
// differentiable regions is one ppstage::split_graph node. Run by a simple GraphExecutor
// with grad mode on, such a node runs the region's forward graph through a profiling
// executor without recording autograd, and gives its outputs two autograd nodes: one runs
// the input-gradient graph (the activations' gradients, and what the weights' need), the
// other the weight-gradient graph. What lies between regions (ops without a symbolic
// gradient, such as ppstage's keyed dropout) records autograd as eager ops do, and so does
// a region TorchScript fails to differentiate: `eager_why`, when given and empty, gets the
// first such failure's message.
std::shared_ptr<torch::jit::Graph> splitAutodiff(const std::shared_ptr<torch::jit::Graph>& graph,
                                                 const AutodiffInputs& inputs,
                                                 std::string* eager_why = nullptr);

// How many split_graph nodes `graph` (a splitAutodiff result) holds.
int64_t countSplitGraphs(const torch::jit::Graph& graph);

}  // namespace ppstage
