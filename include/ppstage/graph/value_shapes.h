// The concrete shapes of a ModelGraph's values for one example input: what the plan prints
// for boundary tensors and what FLOP estimates are computed from.
#pragma once

#include <ATen/core/Tensor.h>

#include <unordered_map>
#include <vector>

#include "ppstage/graph/model_graph.h"

namespace torch::jit {
struct Value;
}

namespace ppstage {

struct TensorMeta {
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
  bool requires_grad = false;

  int64_t numel() const;
};

using ValueShapes = std::unordered_map<const torch::jit::Value*, TensorMeta>;

// Runs `model` once on `input` (with gradients recorded, so requires_grad is as in
// training) and returns the metadata of every tensor value in its top-level block: graph
// inputs and node outputs. Ints and List[int]s are listed too, as the int64 tensors of
// shape [] and [n] they cross cuts as. Values inside control-flow blocks are not listed.
ValueShapes recordValueShapes(const ModelGraph& model, const at::Tensor& input);

}  // namespace ppstage
