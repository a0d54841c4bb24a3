// The optimizer over one rank's parameters: AdamW (default) or SGD from torch::optim.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "ppstage/config/config.h"

namespace torch::optim {
class Optimizer;
}

namespace ppstage {

// AdamW(lr, weight_decay) or SGD(lr, weight_decay) over `params`, updated in place.
std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const TrainConfig& train,
                                                       std::vector<at::Tensor> params);

// optimizer.step(), then every gradient is dropped (set undefined, like zero_grad(true)).
void stepAndClear(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params);

}  // namespace ppstage
