// Layers shared by the built-in models, each a TorchScript class made with
// ScriptModuleBuilder. Shapes: `...` is any number of leading dimensions.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

#include "ppstage/models/script_module_builder.h"

namespace ppstage::layers {

// y = x W^T + b. x: (..., in) -> (..., out). W ~ N(0, 0.02), b = 0.
torch::jit::Module linear(ScriptModuleBuilder& builder, int64_t in, int64_t out,
                          at::Generator& gen);

// LayerNorm over the last dimension d. x: (..., d) -> (..., d).
torch::jit::Module layerNorm(ScriptModuleBuilder& builder, int64_t d);

// fc -> GELU -> proj (-> dropout when dropout > 0). x: (..., d) -> (..., d), hidden width
// `hidden`.
torch::jit::Module feedForward(ScriptModuleBuilder& builder, int64_t d, int64_t hidden,
                               double dropout, at::Generator& gen);

// Like nn.Dropout(p): zeroes elements with probability p while training, scales the rest by
// 1 / (1 - p).
torch::jit::Module dropout(ScriptModuleBuilder& builder, double p);

// A container like nn.ModuleList: submodules "0", "1", ..., no forward of its own. A parent
// calls its items as getattr(self.layers, "3").forward(x).
torch::jit::Module moduleList(ScriptModuleBuilder& builder,
                              const std::vector<torch::jit::Module>& items);

// TorchScript lines `    x = getattr(self.<list>, "<i>").forward(x)` for i in [0, count):
// what a scripted `for layer in self.<list>: x = layer(x)` unrolls to.
std::string callEachInTurn(const std::string& list, int64_t count);

// A parameter tensor drawn from N(0, std), reproducible from `gen`.
at::Tensor normalInit(const std::vector<int64_t>& shape, double std, at::Generator& gen);

}  // namespace ppstage::layers
