// The loss the last stage computes for each micro-batch.
//
// A step's loss is the mean over every target that counts in the whole step (all its
// micro-batches and replicas): each micro-batch contributes the sum of its terms divided by
// the step's count (countTargets), so the number of micro-batches does not change it, and
// targets equal to --train.ignore_index weigh nothing wherever they fall. A model that
// computes its own loss (--train.loss model) gives one term per micro-batch: the step's
// loss is the mean of its micro-batches' losses, as gradient accumulation makes it.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage {

// The loss --train.loss names; auto (none named): cross_entropy for an integer
// `deciding_dtype`, mse for a floating-point one. A data file's targets decide (token
// windows, class labels: integer); for data the model shapes (the embedded text,
// synthetic) the model's input does (token ids: next-token cross_entropy).
LossKind resolveLossKind(std::optional<LossKind> chosen, at::ScalarType deciding_dtype);

// One micro-batch's share of a loss.
struct LossTerms {
  at::Tensor sum;  // scalar: the sum of the counted terms (differentiable)
  // cross_entropy: counted targets whose logit is the largest, an int64 scalar on the
  // output's device (read when the caller wants it: no host sync here); else undefined.
  at::Tensor correct;
};

// The terms of `output` (the model's first output; computed in fp32 when it is bf16 or
// fp16) against `target`. Cross entropy
// flattens the logits to (-1, C) and the targets to (-1), so (N, C) logits against (N)
// labels and (N, T, V) against (N, T) both work; targets equal to `ignore_index` do not
// count. Mse counts every element. Model: the output is the loss (`target` unused).
// Throws ppstage::Error on shapes that do not fit, and on a label outside [0, C) that is
// not ignore_index. `target` may be on another device than `output` (the host's copy of a
// GPU run's batch): it is checked there and moved to the output's device.
LossTerms lossTerms(LossKind kind, const at::Tensor& output, const at::Tensor& target,
                    int64_t ignore_index);

// --train.loss model: throws ppstage::Error unless the model's first output, of `dtype` and
// `sizes`, is a floating-point scalar (its loss).
void checkModelLoss(at::ScalarType dtype, const std::vector<int64_t>& sizes);

// How many terms of `target` count: cross_entropy the entries not equal to
// `ignore_index`; mse every element; model 1 (a micro-batch's loss, whatever `target` is).
int64_t countTargets(LossKind kind, const at::Tensor& target, int64_t ignore_index);

// The mean loss of one batch: lossTerms' sum over countTargets (NaN when none counts).
at::Tensor computeLoss(LossKind kind, const at::Tensor& output, const at::Tensor& target,
                       int64_t ignore_index = -100);

}  // namespace ppstage
