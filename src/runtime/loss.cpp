// See include/ppstage/runtime/loss.h.
#include "ppstage/runtime/loss.h"

#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"

namespace ppstage {
namespace {

// Logits (-1, C) and labels (-1), checked against each other where the labels are (the
// host, as the data gives them: no sync with a GPU), then on the logits' device.
std::pair<at::Tensor, at::Tensor> classRows(const at::Tensor& output, const at::Tensor& target,
                                            int64_t ignore_index) {
  PPSTAGE_CHECK(output.dim() >= 2 && at::isFloatingType(output.scalar_type()),
                "cross_entropy loss needs floating-point logits with a class dimension last; "
                "the model's output has shape ",
                output.sizes(), " and dtype ", dtypeName(output.scalar_type()));
  PPSTAGE_CHECK(at::isIntegralType(target.scalar_type(), /*includeBool=*/false),
                "cross_entropy loss needs integer class labels; the targets are ",
                dtypeName(target.scalar_type()), " (use --train.loss mse)");
  const int64_t classes = output.size(-1);
  PPSTAGE_CHECK(output.numel() / classes == target.numel(),
                "cross_entropy loss: ", output.numel() / classes, " rows of logits (output shape ",
                output.sizes(), ") for ", target.numel(), " targets (shape ", target.sizes(), ")");
  at::Tensor labels = target.reshape({-1}).to(at::kLong);
  const at::Tensor counted = labels.ne(ignore_index);
  if (counted.any().item<bool>()) {
    const at::Tensor kept = labels.masked_select(counted);
    const int64_t low = kept.min().item<int64_t>();
    const int64_t high = kept.max().item<int64_t>();
    PPSTAGE_CHECK(low >= 0 && high < classes, "a label is ", low < 0 ? low : high,
                  " but the model's output has ", classes, " classes (labels 0 to ", classes - 1,
                  "; --train.ignore_index ", ignore_index, " is skipped)");
  }
  return {output.reshape({-1, classes}), labels.to(output.device())};
}

}  // namespace

LossKind resolveLossKind(std::optional<LossKind> chosen, at::ScalarType deciding_dtype) {
  if (chosen) return *chosen;
  return at::isIntegralType(deciding_dtype, /*includeBool=*/false) ? LossKind::kCrossEntropy
                                                                   : LossKind::kMse;
}

void checkModelLoss(at::ScalarType dtype, const std::vector<int64_t>& sizes) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  PPSTAGE_CHECK(numel == 1 && at::isFloatingType(dtype),
                "--train.loss model takes the model's first output as its loss, a "
                "floating-point scalar; it is ",
                dtypeName(dtype), " ", shapeText(sizes),
                " (return the loss alone, first in a tuple, or under 'loss' in a dict)");
}

LossTerms lossTerms(LossKind kind, const at::Tensor& model_output, const at::Tensor& target,
                    int64_t ignore_index) {
  // In fp32 whatever the stages computed in (bf16 logits, --train.precision).
  const bool low_precision =
      model_output.is_floating_point() && at::elementSize(model_output.scalar_type()) < 4;
  const at::Tensor output = low_precision ? model_output.to(at::kFloat) : model_output;
  if (kind == LossKind::kModel) {
    checkModelLoss(output.scalar_type(), output.sizes().vec());
    return {output.reshape({}), at::Tensor()};
  }
  if (kind == LossKind::kMse) {
    PPSTAGE_CHECK(output.sizes() == target.sizes(), "mse loss: the model's output has shape ",
                  output.sizes(), " but the targets have shape ", target.sizes());
    return {
        at::mse_loss(output, target.to(output.device(), output.scalar_type()), at::Reduction::Sum),
        at::Tensor()};
  }
  const auto [logits, labels] = classRows(output, target, ignore_index);
  LossTerms terms;
  terms.sum =
      at::cross_entropy_loss(logits, labels, /*weight=*/{}, at::Reduction::Sum, ignore_index);
  const at::Tensor hits =
      logits.detach().argmax(-1).eq(labels).logical_and(labels.ne(ignore_index));
  terms.correct = hits.sum();
  return terms;
}

int64_t countTargets(LossKind kind, const at::Tensor& target, int64_t ignore_index) {
  if (kind == LossKind::kModel) return 1;
  if (kind == LossKind::kMse) return target.numel();
  return target.ne(ignore_index).sum().item<int64_t>();
}

at::Tensor computeLoss(LossKind kind, const at::Tensor& output, const at::Tensor& target,
                       int64_t ignore_index) {
  const int64_t count = countTargets(kind, target, ignore_index);
  return lossTerms(kind, output, target, ignore_index).sum / static_cast<double>(count);
}

}  // namespace ppstage
