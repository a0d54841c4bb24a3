// InOrderGroup: ranks as threads of one process whose communicators deliver point-to-point
// messages as NCCL does at its strictest, on the CPU. It proves on a machine without a GPU
// that a posting order cannot hang NCCL by posting order alone
// (tests/unit/in_order_posting_test.cpp): each communicator is one stream of its own, so
// what it does not model is the GPU's side (kernels of several communicators that must run
// at once, host-blocking waits).
//
// Note [NCCL's posting order]. NCCL has no tags and no eager buffering to count on:
//   - Each rank has one stream, a queue of groups. A send() or recv() is a group of its
//     own; batch() posts one group of all its operations (ncclGroupStart/End).
//   - Only the group at the head of a rank's stream progresses; it leaves the head when
//     every one of its operations has completed. A group's operations progress together.
//   - The k-th send from rank a to rank b meets the k-th receive on b from a, whatever its
//     tag. A send completes only when it meets its receive, both at the heads of their
//     streams: no buffering, which is NCCL once messages outgrow its buffers.
//   - A send and the receive it meets must carry the same tag, dtype and element count:
//     a mismatch is a CommError naming both ("posting orders differ"), where NCCL would
//     deliver the wrong bytes silently.
//   - A collective (allReduceSum, broadcast, barrier, split) waits until the rank's stream
//     is empty, as an NCCL collective queued behind it would, then runs as LocalGroup's.
// A wait that cannot finish times out with every rank's stuck head in its message.
//
//   InOrderGroup group(2, CommOptions{std::chrono::seconds(5)});
//   // in thread r: auto comm = group.communicator(r); comm->batch({...});
#pragma once

#include <memory>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/local_communicator.h"

namespace ppstage {

class InOrderGroup {
 public:
  explicit InOrderGroup(int size, CommOptions options = {});
  // The communicator of `rank`; each rank's is used by one thread at a time.
  std::unique_ptr<Communicator> communicator(int rank) const;
  // allReduceSum calls so far, every rank's, in this group and the groups split from it.
  int64_t allReduces() const;

  struct State;  // the streams and the per-pair counts of posted operations

 private:
  std::shared_ptr<State> state_;
  LocalGroup collectives_;  // what the collectives and splits run on
};

}  // namespace ppstage
