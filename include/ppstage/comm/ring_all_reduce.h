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

#include <cstdint>

namespace ppstage {

class Communicator;

// In place: `buffer` (contiguous, 1-D) becomes the sum over the ranks of `comm` of their
// buffers, equal on every rank. A collective: every rank calls it with a buffer of the same
// dtype and size. Each element's sum adds the ranks' values around the ring, so a result
// is the same on every rank and from run to run. Throws CommError naming the peer when a
// wait outlasts comm.options().timeout.
void ringAllReduceSum(Communicator& comm, const at::Tensor& buffer);

// The two halves of ringAllReduceSum, for a sum whose parts each rank uses alone (a sharded
// optimizer: each rank steps its part, then every rank gets every part back). `buffer` is
// cut into comm.size() near-equal chunks (the first ones one element longer); the chunk a
// rank owns is ringOwnedChunk's.
//
// ringReduceScatterSum: in place, the chunk this rank owns becomes the sum over the ranks
// of theirs, added around the ring as ringAllReduceSum adds it (the same values, bitwise);
// the other chunks hold partial sums. ringAllGather: every rank's owned chunk travels
// around the ring into its place in every rank's buffer; the rest of `buffer` is
// overwritten. Both are collectives over `comm` with the same dtype and size everywhere,
// and throw CommError naming the peer when a wait outlasts comm.options().timeout.
void ringReduceScatterSum(Communicator& comm, const at::Tensor& buffer);
void ringAllGather(Communicator& comm, const at::Tensor& buffer);

// The chunk of `buffer` that `rank` of `ranks` owns after ringReduceScatterSum (a view);
// of a row of `elements`, where it starts (its first element's index) and its length.
at::Tensor ringOwnedChunk(const at::Tensor& buffer, int rank, int ranks);
int64_t ringOwnedOffset(int64_t elements, int rank, int ranks);
int64_t ringOwnedElements(int64_t elements, int rank, int ranks);

}  // namespace ppstage
