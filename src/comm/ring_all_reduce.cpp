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

// Where chunk c of `elements` cut into `n` near-equal pieces (the first ones one element
// longer) begins.
int64_t chunkBegin(int64_t elements, int c, int n) {
  return c * (elements / n) + std::min<int64_t>(c, elements % n);
}

// Chunk c of `buffer` cut so.
at::Tensor chunkOf(const at::Tensor& buffer, int c, int n) {
  const int64_t elements = buffer.numel();
  return buffer.slice(0, chunkBegin(elements, c, n), chunkBegin(elements, c + 1, n));
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

// The ring's shape for `comm`: the neighbours, and chunk indices taken modulo n.
struct Ring {
  explicit Ring(const Communicator& comm)
      : n(comm.size()), r(comm.rank()), next((r + 1) % n), prev((r + n - 1) % n) {}
  int wrap(int c) const { return ((c % n) + n) % n; }
  int n, r, next, prev;
};

void checkRow(const at::Tensor& buffer) {
  PPSTAGE_INTERNAL_ASSERT(buffer.dim() == 1 && buffer.is_contiguous(),
                          "a ring collective takes one contiguous row");
}

}  // namespace

// After step k of the reduce-scatter, rank r has added its own value into the chunk it
// received, r - k - 1; after n - 1 steps it holds the whole sum of chunk r + 1 (mod n).
void ringReduceScatterSum(Communicator& comm, const at::Tensor& buffer) {
  checkRow(buffer);
  const Ring ring(comm);
  if (ring.n == 1) return;
  at::Tensor scratch = at::empty({buffer.numel() / ring.n + 1}, buffer.options());
  for (int step = 0; step < ring.n - 1; ++step) {
    at::Tensor mine = chunkOf(buffer, ring.wrap(ring.r - step - 1), ring.n);
    at::Tensor in = scratch.narrow(0, 0, mine.numel());
    exchange(comm, chunkOf(buffer, ring.wrap(ring.r - step), ring.n), ring.next, in, ring.prev);
    mine.add_(in);
  }
}

void ringAllGather(Communicator& comm, const at::Tensor& buffer) {
  checkRow(buffer);
  const Ring ring(comm);
  for (int step = 0; step < ring.n - 1; ++step) {
    exchange(comm, chunkOf(buffer, ring.wrap(ring.r + 1 - step), ring.n), ring.next,
             chunkOf(buffer, ring.wrap(ring.r - step), ring.n), ring.prev);
  }
}

void ringAllReduceSum(Communicator& comm, const at::Tensor& buffer) {
  ringReduceScatterSum(comm, buffer);
  ringAllGather(comm, buffer);
}

at::Tensor ringOwnedChunk(const at::Tensor& buffer, int rank, int ranks) {
  return chunkOf(buffer, (rank + 1) % ranks, ranks);
}

int64_t ringOwnedOffset(int64_t elements, int rank, int ranks) {
  return chunkBegin(elements, (rank + 1) % ranks, ranks);
}

int64_t ringOwnedElements(int64_t elements, int rank, int ranks) {
  const int c = (rank + 1) % ranks;
  return chunkBegin(elements, c + 1, ranks) - chunkBegin(elements, c, ranks);
}

}  // namespace ppstage
