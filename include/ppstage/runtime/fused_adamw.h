// FusedAdamW: torch::optim::AdamW whose step runs ATen's fused multi-tensor kernel
// (_fused_adamw_) over all of a group's parameters of one dtype at once: on a GPU one
// update launch per step (and a fill of each parameter's step scalar) where
// torch::optim::AdamW launches about ten per parameter. Its state is AdamW's
// (AdamWParamState: step, exp_avg, exp_avg_sq), so optimizerState, setOptimizerState and
// checkpoints treat both alike, and a run may resume with either.
//
// The arithmetic is AdamW's, as one kernel rounds it: decay p *= 1 - lr wd, the moments,
// then p -= lr / (1 - b1^t) exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - b2^t) + eps). Results
// agree with torch::optim::AdamW within a few float32 roundings, not bitwise, so
// makeOptimizer (runtime/optimizer.h) takes it for CUDA parameters only: CPU runs stay
// bitwise what they were.
#pragma once

#include <torch/optim/adamw.h>

#include <vector>

namespace ppstage {

class FusedAdamW final : public torch::optim::AdamW {
 public:
  FusedAdamW(std::vector<at::Tensor> params, torch::optim::AdamWOptions options);
  // Parameters without a gradient are left alone, their state too. No closure.
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace ppstage
