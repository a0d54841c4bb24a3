// All-reduce's packing, shared by the communicators that reduce flat buffers of one dtype
// (MPI: buckets of a bounded size; NCCL: one per dtype): the tensors grouped by dtype, each
// group flattened into contiguous buffers, and after the reduction the buffers' slices
// copied back into the tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ppstage {

struct FlatBuffer {
  std::vector<at::Tensor> tensors;  // of one dtype, in the order the caller gave them
  at::Tensor buffer;                // (sum of their numel,): their elements, concatenated
};

// `tensors` grouped by dtype (in dtype order), each group cut, in the caller's order, into
// buckets of at most `max_bytes` (0: no limit) as summed: half-precision elements count as
// the float32 they are summed in. A contiguous tensor that does not fit is cut: its pieces
// are views of it, so unflatten() writes the sums into it. A non-contiguous one larger
// than a bucket is a bucket alone.
std::vector<std::vector<at::Tensor>> bucketsByDtype(const std::vector<at::Tensor>& tensors,
                                                    int64_t max_bytes);

// One bucket's tensors (of one dtype) concatenated into a new buffer on their device.
FlatBuffer flatten(std::vector<at::Tensor> bucket);

// One FlatBuffer per dtype of `tensors`, in dtype order.
std::vector<FlatBuffer> flattenByDtype(const std::vector<at::Tensor>& tensors);

// Copies `flat.buffer` (of any dtype; converted back) into its tensors.
void unflatten(const FlatBuffer& flat);

}  // namespace ppstage
