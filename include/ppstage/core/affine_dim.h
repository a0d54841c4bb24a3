// One dimension of a tensor as an affine function of the micro-batch size b and the
// sequence length L: what graph's value shapes record for every value of the model
// (graph/value_shapes.h, TensorMeta::dims) and what neighbouring stages agree on for the
// tensors they exchange (comm/boundary_spec.h).
#pragma once

#include <cstdint>
#include <string>

namespace ppstage {

// per_sample * b + fixed + per_token * L + per_sample_token * b * L. A batch dimension is
// {1, 0}; with fixed lengths a flattened (batch * seq) one {seq, 0} and others {0, size};
// where lengths differ a sequence dimension {0, 0, 1} and a flattened one {0, 0, 0, 1}.
struct AffineDim {
  int64_t per_sample = 0;
  int64_t fixed = 0;
  int64_t per_token = 0;
  int64_t per_sample_token = 0;

  bool followsLength() const { return per_token != 0 || per_sample_token != 0; }
  int64_t at(int64_t batch, int64_t length = 0) const {
    return (per_sample + per_sample_token * length) * batch + fixed + per_token * length;
  }
  bool operator==(const AffineDim& o) const {
    return per_sample == o.per_sample && fixed == o.fixed && per_token == o.per_token &&
           per_sample_token == o.per_sample_token;
  }
  bool operator!=(const AffineDim& o) const { return !(*this == o); }
};

// No tensor has a dimension near this many elements per sample or token. With coefficients
// at most this, their sums cannot overflow, nor AffineDim::at() for b * (L + 1) below 2^31.
constexpr int64_t kMaxAffineCoefficient = int64_t{1} << 31;

// A sum of terms in b and L: "b", "16b", "L", "bL", "64bL+3", "96", "0".
std::string affineDimText(const AffineDim& dim);

// The inverse of affineDimText: signed terms, each a coefficient (or none: 1) and b, bL, L
// or nothing. Throws ppstage::Error for malformed text or a coefficient beyond
// kMaxAffineCoefficient.
AffineDim parseAffineDim(const std::string& text);

}  // namespace ppstage
