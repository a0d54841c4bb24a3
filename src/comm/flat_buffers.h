// All-reduce's packing, shared by the communicators that reduce one buffer per dtype (MPI,
// NCCL): the tensors grouped by dtype, each group flattened into one contiguous buffer, and
// after the reduction the buffer's slices copied back into the tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace ppstage {

struct FlatBuffer {
  std::vector<at::Tensor> tensors;  // of one dtype, in the order the caller gave them
  at::Tensor buffer;                // (sum of their numel,): their elements, concatenated
};

// One FlatBuffer per dtype of `tensors`, in dtype order; each buffer is a new tensor on the
// tensors' device.
std::vector<FlatBuffer> flattenByDtype(const std::vector<at::Tensor>& tensors);

// Copies `flat.buffer` (of any dtype; converted back) into its tensors.
void unflatten(const FlatBuffer& flat);

}  // namespace ppstage
