// One differentiable region of a compiled graph, differentiated ahead of time with its
// backward cut into I and W; what a ppstage::split_graph node runs. Part of
// Note [Compiled backward and the I/W split] (split_autodiff.cpp).
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <stdexcept>
#include <vector>

namespace torch::jit {
struct Graph;
}  // namespace torch::jit

namespace ppstage::compile_detail {

// The node kind splitAutodiff gives a region, and its attribute holding the region's
// SplitGradient (makeSplitGradient's capsule).
c10::Symbol splitGraphKind();
c10::Symbol gradientAttr();

// What makeSplitGradient throws when TorchScript cannot differentiate a region.
struct NotDifferentiable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `region` (a DifferentiableGraph's subgraph) differentiated and its backward cut, as an
// IValue capsule for a split_graph node's gradientAttr; `weight[i]` says whether region
// input i is a weight. Throws NotDifferentiable.
c10::IValue makeSplitGradient(const std::shared_ptr<torch::jit::Graph>& region,
                              std::vector<bool> weight);

// Registers split_graph with TorchScript's operators; once per process, before a graph
// holding one first runs (splitAutodiff calls it).
void registerSplitGraphOperator();

}  // namespace ppstage::compile_detail
