// The concrete shapes of a ModelGraph's values for the example input: what the plan prints
// for boundary tensors, what FLOP estimates are computed from, and how each dimension
// grows with the batch (what receive buffers for a micro-batch are sized from).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <unordered_map>
#include <vector>

#include "ppstage/core/affine_dim.h"
#include "ppstage/graph/model_graph.h"

namespace torch::jit {
struct Value;
}

namespace ppstage {

struct TensorMeta {
  std::vector<int64_t> sizes;  // for the example input
  at::ScalarType dtype = at::kFloat;
  bool requires_grad = false;
  // Each dimension as a function of the batch (core/affine_dim.h): at the example's batch,
  // `sizes`. A batch dimension is {1, 0}, a flattened (batch * seq) one {seq, 0}, the rest
  // {0, size}. Empty when the shape is not an affine function of the batch.
  std::vector<AffineDim> dims;
  // Whether `dims` also say how the shape follows the sequence length L: where
  // recordLengthGrowth probed a second length and the shape is affine in it (a (b, L, C)
  // activation's L is {0, 0, 1}, a flattened (b*L, C) one's b*L {0, 0, 0, 1}). Otherwise
  // `dims` hold at the example's length only: with fixed lengths (never probed), and for a
  // shape not affine in the length (a flattened (b, L*L) attention matrix).
  bool follows_length = false;

  int64_t numel() const;
};

using ValueShapes = std::unordered_map<const torch::jit::Value*, TensorMeta>;

// Sizes and dtypes of every top-level value of `model` for `make_input(batch)` (one tensor
// per model input, ModelGraph::input_names): graph
// inputs and node outputs, with ints and List[int]s listed as the int64 tensors of shape
// [] and [n] they cross cuts as. Values inside control-flow blocks are not listed.
// Two probe runs (see value_shapes.cpp): the example batch without autograd, and a small
// batch with autograd for requires_grad and per-sample growth. The module's own tensors
// are not modified (buffers are copied first).
ValueShapes recordValueShapes(
    const ModelGraph& model,
    const std::function<std::vector<at::Tensor>(int64_t batch)>& make_input, int64_t batch);

// Adds to `shapes` (recordValueShapes' at `batch`) how every value follows the sequence
// length (TensorMeta::dims and follows_length), from probes without autograd on the
// inputs cut to `short_length` along their dimension 1 (batches 2 and 3), checked at half
// of it (batch 2). Nothing when the inputs have no dimension 1 longer than `short_length`.
// Throws what the model throws on the shorter inputs.
void recordLengthGrowth(const ModelGraph& model,
                        const std::function<std::vector<at::Tensor>(int64_t batch)>& make_input,
                        int64_t batch, int64_t short_length, ValueShapes& shapes);

// `inputs` cut to `length` along dimension 1, the sequence (those of fewer dimensions as
// they are).
std::vector<at::Tensor> narrowSequences(const std::vector<at::Tensor>& inputs, int64_t length);

// One probe run on `input` (one tensor per model input) without autograd: sizes and dtypes of the
// graph's inputs and top-level tensor values (requires_grad and dims are not filled). Values
// that are not always tensors (see findMaybeUninitialized in value_shapes.cpp) are not listed.
ValueShapes probeTensorValues(const ModelGraph& model, const std::vector<at::Tensor>& input);

}  // namespace ppstage
