// graph::capture: a torch::jit::Module's forward -> ModelGraph (model_graph.h says what a
// ModelGraph is; src/graph/capture.cpp how it is made).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

#include "ppstage/graph/model_graph.h"

namespace ppstage {

// A model's forward inlined into one graph, its module attributes read, not yet simplified:
// what the training graph and the evaluation graph are each specialized from
// (specializeForward), so that a run inlines its model once. It holds the module's tensors
// (ModelGraph::parameters).
struct InlinedForward {
  ModelGraph model;
  // The constants that stand where a module's `training` flag was read: each module's own
  // flag at inlining. Nodes of `model.graph`.
  std::vector<torch::jit::Node*> training_reads;
};

// Inlines `module.forward`, fed tensors for the arguments named in `inputs` (in forward's
// order; empty: its first argument). Other arguments need default values, which are baked
// in. Throws ppstage::Error for a forward ppstage cannot capture (an argument without a
// default that is not fed, a call whose body is not TorchScript, module state assigned in
// forward, ...).
InlinedForward inlineForward(const torch::jit::Module& module,
                             const std::vector<std::string>& inputs);

// Which mode a graph is specialized for: each module's `training` flag as it was inlined
// (a training run's), or every one false (evaluation, as module.eval() makes it: no
// dropout, BatchNorm on its running statistics).
enum class ForwardMode { kAsInlined, kEval };

// A copy of `forward`'s graph for `mode`, simplified: tuple outputs flattened, branches on
// constants gone. With `example` tensors, one per input (any batch size), checks of a
// tensor's rank and dtype (`x.dim() == 3`) are decided as they come out on them, so that
// branches they rule out (fast paths, error paths) are gone; see Note [Specializing to
// ranks and dtypes]. Random ops are keyed (keyed_random.cpp) and tied tensors grouped.
// Throws ppstage::Error for outputs that are not tensors, or a model that fails on
// `example`.
ModelGraph specializeForward(const InlinedForward& forward, ForwardMode mode,
                             const std::vector<at::Tensor>& example);

// inlineForward, then specializeForward as inlined.
ModelGraph captureModel(const torch::jit::Module& module, const std::vector<std::string>& inputs,
                        const std::vector<at::Tensor>& example);

// The tensor of what `module.forward` returned that a captured graph outputs first: the
// returned tensor, a tuple's first (nested tuples flattened), a dict's "loss" else its
// first value.
at::Tensor firstModelOutput(const c10::IValue& output);

// One input, forward's first argument.
ModelGraph captureModel(const torch::jit::Module& module, const at::Tensor& example = {});

}  // namespace ppstage
