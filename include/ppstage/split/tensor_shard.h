// How a tensor-parallel rank's tensor is its share of the model's whole tensor.
//
// Dimension `dim` of the whole tensor is `parts` equal parts one after the other (a fused
// q/k/v projection's rows: 3 parts), and each part is cut into `ranks` equal contiguous
// slices: rank r holds slice r of every part, in part order. With parts 1, rank r holds
// rows [r*n/ranks, (r+1)*n/ranks) of dimension `dim`. `dim` -1: the whole tensor
// (replicated on every rank).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ppstage {

struct TensorShard {
  int dim = -1;
  int parts = 1;
  int rank = 0;
  int ranks = 1;

  bool sharded() const { return dim >= 0; }
  // "dim 0 of 3 parts, rank 1 of 2"; "whole" when not sharded.
  std::string describe() const;
};

// This rank's share of `whole` (a copy, contiguous); `whole` itself when not sharded.
at::Tensor shardOf(const at::Tensor& whole, const TensorShard& shard);

// Writes `piece` (rank shard.rank's share) into its place in `whole` (the whole tensor's
// shape); all of `whole` when not sharded.
void placeShard(at::Tensor& whole, const at::Tensor& piece, const TensorShard& shard);

// The whole tensor's size along the shard's dim, from a shard of `piece_size`.
inline int64_t wholeSize(int64_t piece_size, const TensorShard& shard) {
  return shard.sharded() ? piece_size * shard.ranks : piece_size;
}

}  // namespace ppstage
