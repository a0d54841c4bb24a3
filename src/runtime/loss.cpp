// See include/ppstage/runtime/loss.h.
#include "ppstage/runtime/loss.h"

#include <ATen/ATen.h>

#include "ppstage/core/error.h"

namespace ppstage {

LossKind resolveLossKind(std::optional<LossKind> chosen, at::ScalarType input_dtype) {
  if (chosen) return *chosen;
  return at::isIntegralType(input_dtype, /*includeBool=*/false) ? LossKind::kCrossEntropy
                                                                : LossKind::kMse;
}

at::Tensor computeLoss(LossKind kind, const at::Tensor& output, const at::Tensor& target) {
  if (kind == LossKind::kMse) {
    PPSTAGE_CHECK(output.sizes() == target.sizes(), "mse loss: the model's output has shape ",
                  output.sizes(), " but the targets have shape ", target.sizes());
    return at::mse_loss(output, target.to(output.scalar_type()));
  }
  PPSTAGE_CHECK(output.dim() >= 2 && at::isFloatingType(output.scalar_type()),
                "cross_entropy loss needs floating-point logits with a class dimension last; "
                "the model's output has shape ",
                output.sizes(), " and dtype ", output.scalar_type());
  const int64_t classes = output.size(-1);
  PPSTAGE_CHECK(output.numel() / classes == target.numel(),
                "cross_entropy loss: ", output.numel() / classes, " rows of logits (output shape ",
                output.sizes(), ") for ", target.numel(), " targets (shape ", target.sizes(), ")");
  return at::cross_entropy_loss(output.reshape({-1, classes}), target.reshape({-1}));
}

}  // namespace ppstage
