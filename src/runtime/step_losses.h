// StepLosses: the last stage's micro-batch losses of one step, kept where they were
// computed (a GPU's memory) and read into the step's figures once, at its end: one copy
// to the host per step instead of a sync per micro-batch.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

#include "ppstage/runtime/executor.h"

namespace ppstage {

class StepLosses {
 public:
  // Global micro-batch `microbatch`'s share of the step's loss (a scalar) and, for
  // cross_entropy, its correct count (LossTerms::correct; undefined otherwise).
  void add(int64_t microbatch, const at::Tensor& loss, const at::Tensor& correct);
  // Adds them to `stats`: loss_sum in the order they were added, correct, and
  // first_nonfinite_microbatch; then forgets them.
  void readInto(StepStats& stats);
  void clear();

 private:
  std::vector<int64_t> microbatches_;
  std::vector<at::Tensor> losses_, corrects_;
};

}  // namespace ppstage
