// See step_losses.h.
#include "step_losses.h"

#include <ATen/ATen.h>

#include <cmath>

namespace ppstage {

void StepLosses::add(int64_t microbatch, const at::Tensor& loss, const at::Tensor& correct) {
  microbatches_.push_back(microbatch);
  losses_.push_back(loss.detach());
  if (correct.defined()) corrects_.push_back(correct);
}

void StepLosses::readInto(StepStats& stats) {
  if (!losses_.empty()) {
    // float -> double as item<double>() converts, then summed in order on the host.
    const at::Tensor host = at::stack(losses_).to(at::kDouble).cpu();
    const double* value = host.data_ptr<double>();
    for (size_t i = 0; i < losses_.size(); ++i) {
      stats.loss_sum += value[i];
      if (!std::isfinite(value[i]) && stats.first_nonfinite_microbatch < 0) {
        stats.first_nonfinite_microbatch = microbatches_[i];
      }
    }
  }
  if (!corrects_.empty()) stats.correct += at::stack(corrects_).sum().item<int64_t>();
  clear();
}

void StepLosses::clear() {
  microbatches_.clear();
  losses_.clear();
  corrects_.clear();
}

}  // namespace ppstage
