// The optimizer over one rank's parameters: AdamW (default) or SGD from torch::optim, and
// its per-parameter state as named tensors, which checkpoints store by module path.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/config/config.h"

namespace torch::optim {
class Optimizer;
}

namespace ppstage {

// AdamW(lr, weight_decay) or SGD(lr, momentum, weight_decay) over `params`, updated in
// place. AdamW of CUDA parameters is FusedAdamW (runtime/fused_adamw.h): one kernel per step.
std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const TrainConfig& train,
                                                       std::vector<at::Tensor> params);

// optimizer.step(), then every gradient is dropped (set undefined, like zero_grad(true)).
void stepAndClear(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& params);

// Sets the learning rate of every parameter group (lr_schedule.h gives it per step).
void setLearningRate(torch::optim::Optimizer& optimizer, double lr);

// Drops every gradient without stepping (a skipped step).
void clearGradients(const std::vector<at::Tensor>& params);

// The optimizer's state of `param`, named as torch.optim names it: AdamW "step" (an int64
// scalar), "exp_avg", "exp_avg_sq" (and "max_exp_avg_sq" with amsgrad); SGD
// "momentum_buffer". Empty before the parameter's first step, and for SGD without momentum.
std::map<std::string, at::Tensor> optimizerState(torch::optim::Optimizer& optimizer,
                                                 const at::Tensor& param);

// Replaces the state of `param` with `state` (what optimizerState returned, possibly in
// another process). Throws ppstage::Error when a tensor is missing or has another shape.
void setOptimizerState(torch::optim::Optimizer& optimizer, const at::Tensor& param,
                       const std::map<std::string, at::Tensor>& state, const std::string& path);

}  // namespace ppstage
