// See src/comm/flat_buffers.h.
#include "flat_buffers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

namespace ppstage {

namespace {

// Bytes per element as summed (comm/mpi_communicator.cpp: half types in float32).
int64_t summedElementBytes(const at::Tensor& t) {
  const bool half = t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
  return half ? 4 : static_cast<int64_t>(t.element_size());
}

}  // namespace

std::vector<std::vector<at::Tensor>> bucketsByDtype(const std::vector<at::Tensor>& tensors,
                                                    int64_t max_bytes) {
  std::map<at::ScalarType, std::vector<std::vector<at::Tensor>>> by_dtype;
  std::map<at::ScalarType, int64_t> filled;  // bytes in each dtype's last bucket
  for (const at::Tensor& t : tensors) {
    auto& buckets = by_dtype[t.scalar_type()];
    int64_t& bytes = filled[t.scalar_type()];
    // The dtype's last bucket, or a new one when it has no room for `size` more bytes.
    const auto bucketWithRoom = [&](int64_t size) -> std::vector<at::Tensor>& {
      if (buckets.empty() || (max_bytes > 0 && bytes + size > max_bytes)) {
        buckets.emplace_back();
        bytes = 0;
      }
      return buckets.back();
    };
    const int64_t element = summedElementBytes(t);
    if (max_bytes <= 0 || !t.is_contiguous()) {
      const int64_t size = t.numel() * element;
      bucketWithRoom(size).push_back(t);
      bytes += size;
      continue;
    }
    const at::Tensor row = t.view({-1});
    for (int64_t begin = 0; begin < row.numel() || (begin == 0 && row.numel() == 0);) {
      std::vector<at::Tensor>& bucket = bucketWithRoom(element);
      const int64_t count =
          std::min(row.numel() - begin, std::max<int64_t>(1, (max_bytes - bytes) / element));
      bucket.push_back(count == row.numel() ? t : row.narrow(0, begin, count));
      bytes += count * element;
      begin += std::max<int64_t>(count, 1);
    }
  }
  std::vector<std::vector<at::Tensor>> out;
  for (auto& [dtype, buckets] : by_dtype) {
    for (auto& bucket : buckets) out.push_back(std::move(bucket));
  }
  return out;
}

FlatBuffer flatten(std::vector<at::Tensor> bucket) {
  std::vector<at::Tensor> rows;
  for (const at::Tensor& t : bucket) rows.push_back(t.reshape({-1}));
  at::Tensor buffer = at::cat(rows);
  return FlatBuffer{std::move(bucket), std::move(buffer)};
}

std::vector<FlatBuffer> flattenByDtype(const std::vector<at::Tensor>& tensors) {
  std::vector<FlatBuffer> flats;
  for (std::vector<at::Tensor>& bucket : bucketsByDtype(tensors, 0)) {
    flats.push_back(flatten(std::move(bucket)));
  }
  return flats;
}

void unflatten(const FlatBuffer& flat) {
  int64_t offset = 0;
  for (const at::Tensor& t : flat.tensors) {
    t.copy_(flat.buffer.slice(0, offset, offset + t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace ppstage
