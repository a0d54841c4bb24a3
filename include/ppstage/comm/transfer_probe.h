// What one pipeline message costs: from a send's post to its data being ready at the
// receiver, measured on the run's own boundaries (what the simulator's ActionCosts::comm
// stands for, Note [Predicted step] in src/train/run_summary.cpp).
//
// The two ranks of every boundary ping-pong the boundary's tensors, one micro-batch of
// them, as the executor sends them (one message per tensor, all posted, then waited for):
// a message's time is half the round trip, the median of `round_trips` after two warm-up
// trips. On one machine that is a copy through shared memory, tens of microseconds for a
// (2, 128, 256) float activation; across machines it is the network's latency and bandwidth.
#pragma once

#include <cstdint>
#include <vector>

#include "ppstage/comm/boundary_spec.h"

namespace ppstage {

class Communicator;

// One boundary this rank takes part in: the stage that receives across it, the rank at
// its other end, which end this rank is, and what crosses.
struct BoundaryLink {
  int stage = 0;  // stage s: the boundary between s - 1 and s
  int peer = 0;
  bool receiver = false;  // this rank runs s (else s - 1)
  BoundarySpec spec;
};

struct TransferSeconds {
  double sum = 0;  // the one-way times of the boundaries this rank measured (as sender)
  int64_t count = 0;
};

// Ping-pongs every link, in increasing stage order (both ends of a boundary reach it in
// the same order, so no two ranks wait for each other across links), with micro-batches
// of `length` tokens where the spec follows the sequence length (0: it does not). Blocking
// over the links' ranks only; throws CommError when a peer does not answer in time.
TransferSeconds measureTransfers(Communicator& comm, std::vector<BoundaryLink> links,
                                 int64_t microbatch_size, int64_t length = 0, int round_trips = 20);

}  // namespace ppstage
