// See include/ppstage/split/flops.h.
#include "ppstage/split/flops.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

namespace ppstage {
namespace {

const TensorMeta* metaOf(const torch::jit::Value* value, const ValueShapes& shapes) {
  const auto it = shapes.find(value);
  return it == shapes.end() ? nullptr : &it->second;
}

// out: (..., N) produced from a reduction of length K: 2 * out elements * K.
double productFlops(const TensorMeta& out, int64_t k) {
  return 2.0 * static_cast<double>(out.numel()) * static_cast<double>(k);
}

double convolutionFlops(const torch::jit::Node* node, const TensorMeta& out,
                        const ValueShapes& shapes) {
  const TensorMeta* weight = metaOf(node->input(1), shapes);
  if (weight == nullptr || weight->sizes.size() < 2) return static_cast<double>(out.numel());
  // weight: (C_out, C_in/groups, k...) for conv; (C_in, C_out/groups, k...) transposed.
  int64_t per_output = 1;
  for (size_t i = 1; i < weight->sizes.size(); ++i) per_output *= weight->sizes[i];
  bool transposed = node->kind() == c10::aten::conv_transpose1d ||
                    node->kind() == c10::aten::conv_transpose2d ||
                    node->kind() == c10::aten::conv_transpose3d;
  // aten::_convolution / aten::convolution (what tracing records) carry it as input 6.
  if ((node->kind() == c10::aten::_convolution || node->kind() == c10::aten::convolution) &&
      node->inputs().size() > 6) {
    transposed = torch::jit::constant_as<bool>(node->input(6)).value_or(false);
  }
  if (transposed) {
    // Each input element is spread over C_out/groups * kernel outputs.
    const TensorMeta* in = metaOf(node->input(0), shapes);
    if (in != nullptr) return 2.0 * static_cast<double>(in->numel()) * per_output;
  }
  return productFlops(out, per_output);
}

}  // namespace

double estimateFlops(const torch::jit::Node* node, const ValueShapes& shapes) {
  if (!node->blocks().empty() || node->outputs().empty()) return 0;
  const TensorMeta* out = metaOf(node->output(0), shapes);
  if (out == nullptr) return 0;
  const c10::Symbol kind = node->kind();
  const TensorMeta* a = node->inputs().empty() ? nullptr : metaOf(node->input(0), shapes);
  if (kind == c10::aten::linear || kind == c10::aten::matmul || kind == c10::aten::mm ||
      kind == c10::aten::bmm) {
    if (a != nullptr && !a->sizes.empty()) return productFlops(*out, a->sizes.back());
  }
  if (kind == c10::aten::addmm || kind == c10::aten::baddbmm || kind == c10::aten::addbmm) {
    const TensorMeta* m1 = metaOf(node->input(1), shapes);
    if (m1 != nullptr && !m1->sizes.empty()) return productFlops(*out, m1->sizes.back());
  }
  if (kind == c10::aten::conv1d || kind == c10::aten::conv2d || kind == c10::aten::conv3d ||
      kind == c10::aten::_convolution || kind == c10::aten::convolution ||
      kind == c10::aten::conv_transpose1d || kind == c10::aten::conv_transpose2d ||
      kind == c10::aten::conv_transpose3d) {
    return convolutionFlops(node, *out, shapes);
  }
  return static_cast<double>(out->numel());
}

}  // namespace ppstage
