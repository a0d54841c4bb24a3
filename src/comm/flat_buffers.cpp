// See src/comm/flat_buffers.h.
#include "flat_buffers.h"

#include <ATen/ATen.h>

#include <map>

namespace ppstage {

std::vector<FlatBuffer> flattenByDtype(const std::vector<at::Tensor>& tensors) {
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  std::vector<FlatBuffer> flats;
  for (auto& [dtype, group] : by_dtype) {
    std::vector<at::Tensor> rows;
    for (const at::Tensor& t : group) rows.push_back(t.reshape({-1}));
    at::Tensor buffer = at::cat(rows);
    flats.push_back(FlatBuffer{std::move(group), std::move(buffer)});
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
