// graph::capture: a torch::jit::Module's forward -> ModelGraph (model_graph.h says what a
// ModelGraph is; src/graph/capture.cpp how it is made).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

#include "ppstage/graph/model_graph.h"

namespace ppstage {

// Captures `module.forward`. The forward must take one tensor; further arguments need
// default values, which are baked in. With an `example` input (any batch size), checks of
// a tensor's rank and dtype (`x.dim() == 3`) are decided as they come out on it, so that
// branches they rule out (fast paths, error paths) are gone; see Note [Specializing to
// ranks and dtypes]. Throws ppstage::Error for a forward ppstage cannot capture (other
// inputs, non-tensor outputs, module state assigned in forward, ...).
ModelGraph captureModel(const torch::jit::Module& module, const at::Tensor& example = {});

}  // namespace ppstage
