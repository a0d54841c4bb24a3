// The loss the last stage computes for each micro-batch.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "ppstage/config/config.h"

namespace ppstage {

// The loss --train.loss names; auto (none named): cross_entropy when the model takes integer
// token ids, mse otherwise.
LossKind resolveLossKind(std::optional<LossKind> chosen, at::ScalarType input_dtype);

// Mean loss of `output` (the model's first output) against `target`. For cross entropy the
// logits are flattened to (-1, V) and the targets to (-1), so (B, T, V) and (B*T, V)
// logits both work with (B, T) targets. Throws ppstage::Error on shapes that do not fit.
at::Tensor computeLoss(LossKind kind, const at::Tensor& output, const at::Tensor& target);

}  // namespace ppstage
