// What crosses a pipeline boundary, as both neighbours must agree on it before the first
// step: how many tensors, their dtypes, their shapes as functions of the micro-batch size
// and, where micro-batches differ in length (--data.seq_len_policy bucket or variable), of
// the sequence length.
//
// Each pair of neighbouring stages exchanges its BoundarySpec once (the sender its
// outputs, the receiver its inputs) and checks them; receive buffers are then allocated
// once per micro-batch size from the spec.
//
// Wire format (text, versioned): "ppstage-boundary 2 <stage> <count>\n" then one line per
// tensor: name, dtype, requires_grad, dims as a sum of terms in b (the micro-batch size)
// and L (the sequence length): "b", "16b", "L", "bL", "64bL+3", "96".
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "ppstage/core/affine_dim.h"

namespace ppstage {

class Communicator;

struct TensorSpec {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<AffineDim> dims;
  bool requires_grad = false;

  // The sizes for a micro-batch of `batch` samples of `length` tokens (the length only
  // matters for dims that follow it).
  std::vector<int64_t> sizes(int64_t batch, int64_t length = 0) const;
  bool followsLength() const;
  std::string describe() const;  // "x.5 [b, 32, 64] float32 grad"
  bool operator==(const TensorSpec& o) const {
    return name == o.name && dtype == o.dtype && dims == o.dims && requires_grad == o.requires_grad;
  }
};

struct BoundarySpec {
  int stage = 0;  // the boundary in front of this stage (between stage-1 and stage)
  std::vector<TensorSpec> tensors;

  std::string describe() const;  // "2 tensors: a [b, 4] float32, n [] int64"
  std::string serialize() const;
  // Throws ppstage::Error on text that is not a version-2 BoundarySpec.
  static BoundarySpec deserialize(const std::string& text);
  bool operator==(const BoundarySpec& o) const { return stage == o.stage && tensors == o.tensors; }
};

// Before the first step, on both ranks of the boundary in front of `mine.stage`: sends
// `mine` to `peer`, receives the peer's, and throws ppstage::Error on both ranks when they
// differ, naming both stages, both ranks and both descriptions. `sender_side` is true on the
// rank that runs stage-1 (whose outputs `mine` describes). Blocking, with the timeout.
void exchangeBoundarySpec(Communicator& comm, int peer, const BoundarySpec& mine, bool sender_side);

// One receive buffer per tensor for a micro-batch of `batch` samples of `length` tokens.
std::vector<at::Tensor> allocateReceiveBuffers(const BoundarySpec& spec, int64_t batch,
                                               int64_t length = 0);

}  // namespace ppstage
