// See include/ppstage/comm/ring_all_reduce.h.
//
// The buffer is cut into n chunks. In n - 1 steps of reduce-scatter, each rank sends one
// chunk to the next rank and adds the chunk it receives from the previous one into its own;
// after them rank r holds the whole sum of chunk r + 1. In n - 1 steps of all-gather, the
// summed chunks travel once more around the ring, each received straight into its place.
#include "ppstage/comm/ring_all_reduce.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// Chunk c of `buffer` cut into `n` near-equal pieces (the first ones one element longer).
at::Tensor chunkOf(const at::Tensor& buffer, int c, int n) {
  const int64_t base = buffer.numel() / n, extra = buffer.numel() % n;
  const int64_t begin = c * base + std::min<int64_t>(c, extra);
  return buffer.slice(0, begin, begin + base + (c < extra ? 1 : 0));
}

// Sends chunk `out` to `next` and receives one from `prev` into `in`, both under the
// timeout. Messages between two ranks on one tag arrive in the order they were sent.
void exchange(Communicator& comm, const at::Tensor& out, int next, const at::Tensor& in, int prev) {
  constexpr MessageTag kTag = controlTag(ControlChannel::kAllReduce);
  std::shared_ptr<Work> received = comm.recv(in, prev, kTag);
  std::shared_ptr<Work> sent = comm.send(out, next, kTag);
  received->wait(comm.options().timeout);
  sent->wait(comm.options().timeout);
}

}  // namespace

void ringAllReduceSum(Communicator& comm, const at::Tensor& buffer) {
  PPSTAGE_INTERNAL_ASSERT(buffer.dim() == 1 && buffer.is_contiguous(),
                          "a ring all-reduce takes one contiguous row");
  const int n = comm.size(), r = comm.rank();
  if (n == 1) return;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const auto wrap = [n](int c) { return ((c % n) + n) % n; };
  at::Tensor scratch = at::empty({buffer.numel() / n + 1}, buffer.options());
  for (int step = 0; step < n - 1; ++step) {
    at::Tensor mine = chunkOf(buffer, wrap(r - step - 1), n);
    at::Tensor in = scratch.narrow(0, 0, mine.numel());
    exchange(comm, chunkOf(buffer, wrap(r - step), n), next, in, prev);
    mine.add_(in);
  }
  for (int step = 0; step < n - 1; ++step) {
    exchange(comm, chunkOf(buffer, wrap(r + 1 - step), n), next, chunkOf(buffer, wrap(r - step), n),
             prev);
  }
}

}  // namespace ppstage
