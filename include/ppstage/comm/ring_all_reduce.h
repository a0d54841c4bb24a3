// A ring all-reduce over a communicator's own sends and receives: the bandwidth-optimal
// algorithm for large buffers (each rank moves 2 (n - 1) / n of the bytes), with every wait
// under the communicator's timeout.
//
// MpiCommunicator sums every all-reduce with it: Open MPI's non-blocking MPI_Iallreduce
// moved 0.2-0.6 GB/s for 32 MiB between two ranks on one machine, where its point-to-point
// messages move 6-12 GB/s (docs/benchmarks.md), and a rank that waits too long in a ring
// names the rank it waits for.
#pragma once

#include <ATen/core/Tensor.h>

namespace ppstage {

class Communicator;

// In place: `buffer` (contiguous, 1-D) becomes the sum over the ranks of `comm` of their
// buffers, equal on every rank. A collective: every rank calls it with a buffer of the same
// dtype and size. Each element's sum adds the ranks' values around the ring, so a result
// is the same on every rank and from run to run. Throws CommError naming the peer when a
// wait outlasts comm.options().timeout.
void ringAllReduceSum(Communicator& comm, const at::Tensor& buffer);

}  // namespace ppstage
