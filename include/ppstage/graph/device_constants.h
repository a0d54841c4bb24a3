// The device a traced model was traced on, taken out of its graph: tracing records
// `torch.arange(T, device=x.device)` as the constant device("cpu"), and a tensor the model
// made from Python values (a mask, a table) as a CPU tensor constant. A stage that runs on
// a GPU would mix devices there. capture keeps the model on the CPU; compileLocalStages
// (train/local_stages.h) rewrites each stage's graph for its rank's device before compiling.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/ir.h>

namespace ppstage {

struct DeviceConstants {
  int devices = 0;  // Device constants rewritten
  int tensors = 0;  // tensor constants moved
};

// Rewrites every Device constant of `graph` (sub-blocks too) that is not `device` into
// `device`, and moves every tensor constant of one or more dimensions there. Tensor
// constants of no dimension stay: ATen takes a CPU scalar tensor beside a CUDA tensor, and
// code that reads one on the host (an int of it) keeps working. Returns what it changed.
DeviceConstants moveConstantsTo(torch::jit::Graph& graph, const at::Device& device);

}  // namespace ppstage
