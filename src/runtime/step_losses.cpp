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
  if (losses_.empty()) return;
  // One copy to the host: the losses (float -> double as item<double>() converts), then
  // the correct counts (exact in double below 2^53).
  std::vector<at::Tensor> values;
  for (const at::Tensor& loss : losses_) values.push_back(loss.to(at::kDouble));
  for (const at::Tensor& count : corrects_) values.push_back(count.to(at::kDouble));
  const at::Tensor host = at::stack(values).cpu();
  const double* value = host.data_ptr<double>();
  for (size_t i = 0; i < losses_.size(); ++i) {  // summed in order, as before
    stats.loss_sum += value[i];
    if (!std::isfinite(value[i]) && stats.first_nonfinite_microbatch < 0) {
      stats.first_nonfinite_microbatch = microbatches_[i];
    }
  }
  double correct = 0;
  for (size_t i = losses_.size(); i < values.size(); ++i) correct += value[i];
  stats.correct += static_cast<int64_t>(correct);
  clear();
}

void StepLosses::clear() {
  microbatches_.clear();
  losses_.clear();
  corrects_.clear();
}

}  // namespace ppstage
