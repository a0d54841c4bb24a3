// graph::capture: a torch::jit::Module's forward -> ModelGraph (model_graph.h says what a
// ModelGraph is; src/graph/capture.cpp how it is made).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

#include "ppstage/graph/model_graph.h"

namespace ppstage {

// Captures `module.forward`, fed tensors for the arguments named in `inputs` (in forward's
// order; empty: its first argument). Other arguments need default values, which are baked
// in. With `example` tensors, one per input (any batch size), checks of a tensor's rank and
// dtype (`x.dim() == 3`) are decided as they come out on them, so that branches they rule
// out (fast paths, error paths) are gone; see Note [Specializing to ranks and dtypes].
// Throws ppstage::Error for a forward ppstage cannot capture (an argument without a default
// that is not fed, non-tensor outputs, module state assigned in forward, ...).
ModelGraph captureModel(const torch::jit::Module& module, const std::vector<std::string>& inputs,
                        const std::vector<at::Tensor>& example);

// The tensor of what `module.forward` returned that a captured graph outputs first: the
// returned tensor, a tuple's first (nested tuples flattened), a dict's "loss" else its
// first value.
at::Tensor firstModelOutput(const c10::IValue& output);

// One input, forward's first argument.
ModelGraph captureModel(const torch::jit::Module& module, const at::Tensor& example = {});

}  // namespace ppstage
