// The concrete shapes of a ModelGraph's values for the example input: what the plan prints
// for boundary tensors, what FLOP estimates are computed from, and how each dimension
// grows with the batch (what receive buffers for a micro-batch are sized from).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <unordered_map>
#include <vector>

#include "ppstage/graph/model_graph.h"

namespace torch::jit {
struct Value;
}

namespace ppstage {

struct TensorMeta {
  std::vector<int64_t> sizes;  // for the example batch
  at::ScalarType dtype = at::kFloat;
  bool requires_grad = false;
  // Per dimension, how much it grows per sample: size(b) = per_sample*b + (sizes - per_sample*B)
  // for the example batch B. 1 for a batch dimension, seq for a flattened (batch*seq) one,
  // 0 for the rest; empty when the shape is not an affine function of the batch.
  std::vector<int64_t> per_sample;
  // With a second sequence length probed (recordValueShapes' `short_length`), per
  // dimension, its growth per token of the sequence length L, in the part that does not
  // grow with the batch (`per_token`: a (b, L, C) activation's L) and in the per-sample
  // growth (`per_sample_token`: a flattened (b*L, C) one's b*L). Both empty when not probed,
  // or when the shape is not affine in the length (a flattened (b, L*L) attention matrix).
  std::vector<int64_t> per_token, per_sample_token;

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
// length (TensorMeta::per_token and per_sample_token), from probes without autograd on the
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
// graph's inputs and top-level tensor values (requires_grad and per_sample are not filled). Values
// that are not always tensors (see findMaybeUninitialized in value_shapes.cpp) are not listed.
ValueShapes probeTensorValues(const ModelGraph& model, const std::vector<at::Tensor>& input);

}  // namespace ppstage
