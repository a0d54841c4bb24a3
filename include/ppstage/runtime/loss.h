// The loss the last stage computes for each micro-batch.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ppstage {

enum class LossKind {
  kCrossEntropy,  // logits (..., V) against integer targets (...), mean over targets
  kMse,           // mean squared error against targets of the output's shape
};

// --train.loss: cross_entropy | mse | auto (cross_entropy when the model takes integer
// token ids, mse otherwise). Throws ppstage::Error.
LossKind resolveLossKind(const std::string& option, at::ScalarType input_dtype);
const char* toString(LossKind kind);

// Mean loss of `output` (the model's first output) against `target`. For cross entropy the
// logits are flattened to (-1, V) and the targets to (-1), so (B, T, V) and (B*T, V)
// logits both work with (B, T) targets. Throws ppstage::Error on shapes that do not fit.
at::Tensor computeLoss(LossKind kind, const at::Tensor& output, const at::Tensor& target);

}  // namespace ppstage
