// See include/ppstage/split/tensor_shard.h.
#include "ppstage/split/tensor_shard.h"

#include <ATen/ATen.h>

#include <vector>

#include "ppstage/core/error.h"

namespace ppstage {

namespace {

// The (start, length) of each of `shard`'s slices along its dim of a whole of `size`.
std::vector<std::pair<int64_t, int64_t>> slicesOf(int64_t size, const TensorShard& shard) {
  PPSTAGE_INTERNAL_ASSERT(size % (shard.parts * shard.ranks) == 0, "a dimension of ", size,
                          " cut into ", shard.parts, " parts of ", shard.ranks, " shards");
  const int64_t part = size / shard.parts;
  const int64_t piece = part / shard.ranks;
  std::vector<std::pair<int64_t, int64_t>> slices;
  for (int p = 0; p < shard.parts; ++p) slices.emplace_back(p * part + shard.rank * piece, piece);
  return slices;
}

}  // namespace

std::string TensorShard::describe() const {
  if (!sharded()) return "whole";
  return detail::concat("dim ", dim, parts > 1 ? detail::concat(" of ", parts, " parts") : "",
                        ", rank ", rank, " of ", ranks);
}

at::Tensor shardOf(const at::Tensor& whole, const TensorShard& shard) {
  if (!shard.sharded()) return whole;
  std::vector<at::Tensor> pieces;
  for (const auto& [start, length] : slicesOf(whole.size(shard.dim), shard)) {
    pieces.push_back(whole.narrow(shard.dim, start, length));
  }
  return at::cat(pieces, shard.dim).contiguous();
}

void placeShard(at::Tensor& whole, const at::Tensor& piece, const TensorShard& shard) {
  if (!shard.sharded()) {
    whole.copy_(piece);
    return;
  }
  int64_t offset = 0;
  for (const auto& [start, length] : slicesOf(whole.size(shard.dim), shard)) {
    whole.narrow(shard.dim, start, length).copy_(piece.narrow(shard.dim, offset, length));
    offset += length;
  }
}

}  // namespace ppstage
