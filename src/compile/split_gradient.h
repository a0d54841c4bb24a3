// One differentiable region of a compiled graph, differentiated ahead of time with its
// backward cut into I and W; what a ppstage::split_graph node runs. Part of
// Note [Compiled backward and the I/W split] (split_autodiff.cpp).
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include <memory>
#include <vector>

namespace torch::jit {
struct Graph;
}  // namespace torch::jit

namespace ppstage::compile_detail {

// The node kind splitAutodiff gives a region, and its attribute saying which of the
// region's inputs are weights (an int per input).
c10::Symbol splitGraphKind();
c10::Symbol weightAttr();

// Registers split_graph with TorchScript's operators; once per process, before a graph
// holding one first runs (splitAutodiff calls it).
void registerSplitGraphOperator();

class SplitGradient;

}  // namespace ppstage::compile_detail
