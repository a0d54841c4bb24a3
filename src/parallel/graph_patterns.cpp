// The graph patterns the tensor-parallel proof reads (declared in region_proof.h): constant
// arguments, and the ops a linear layer can be.
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include "region_proof.h"

namespace ppstage::tp_detail {

using torch::jit::Node;
using torch::jit::Value;
namespace aten = c10::aten;
namespace prim = c10::prim;

c10::optional<int64_t> constantInt(const Value* v) {
  const auto value = torch::jit::toIValue(v);
  if (!value || !value->isInt()) return c10::nullopt;
  return value->toInt();
}

c10::optional<std::vector<int64_t>> constantInts(const Value* v) {
  if (v->node()->kind() == prim::ListConstruct) {  // [0, 2, 1, 3] built from constants
    std::vector<int64_t> ints;
    for (const Value* element : v->node()->inputs()) {
      const auto i = constantInt(element);
      if (!i) return c10::nullopt;
      ints.push_back(*i);
    }
    return ints;
  }
  const auto value = torch::jit::toIValue(v);
  if (!value || !value->isIntList()) return c10::nullopt;
  return value->toIntVector();
}

c10::optional<double> constantNumber(const Value* v) {
  const auto value = torch::jit::toIValue(v);
  if (!value || !(value->isInt() || value->isDouble())) return c10::nullopt;
  return value->isInt() ? static_cast<double>(value->toInt()) : value->toDouble();
}

bool asLinear(Node* node, const StageModule& stage, LinearOp& linear) {
  const size_t first_parameter = stage.inputs.size();
  auto isWeight = [&](Value* v) {
    if (v->node()->kind() != prim::Param || v->offset() < first_parameter) return false;
    const StageParameter& p = stage.parameters.at(v->offset() - first_parameter);
    return p.is_parameter && p.value.requires_grad() && p.value.dim() == 2;
  };
  auto isBias = [&](Value* v) {
    if (v->type()->kind() == c10::TypeKind::NoneType) return true;
    if (v->node()->kind() != prim::Param || v->offset() < first_parameter) return false;
    return stage.parameters.at(v->offset() - first_parameter).value.dim() == 1;
  };
  linear = LinearOp{};
  linear.node = node;
  if (node->kind() == aten::linear && isWeight(node->input(1)) && isBias(node->input(2))) {
    linear.input = node->input(0);
    linear.weight = node->input(1);
    linear.bias =
        node->input(2)->type()->kind() == c10::TypeKind::NoneType ? nullptr : node->input(2);
    linear.out_dim = 0;
    linear.in_dim = 1;
    return true;
  }
  const bool product = node->kind() == aten::matmul || node->kind() == aten::mm;
  if (product && isWeight(node->input(1))) {
    linear.input = node->input(0);
    linear.weight = node->input(1);
    linear.out_dim = 1;
    linear.in_dim = 0;
    return true;
  }
  if (node->kind() == aten::addmm && isWeight(node->input(2)) && isBias(node->input(0))) {
    const auto beta = constantNumber(node->input(3));
    const auto alpha = constantNumber(node->input(4));
    if (beta.value_or(0) != 1 || alpha.value_or(0) != 1) return false;  // y = b + x W only
    linear.input = node->input(1);
    linear.weight = node->input(2);
    linear.bias = node->input(0);
    linear.out_dim = 1;
    linear.in_dim = 0;
    return true;
  }
  return false;
}

}  // namespace ppstage::tp_detail
