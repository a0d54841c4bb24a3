// What the planner (plan/cost_profile.h) charges for communication, measured on the job's
// own ranks: a message between two ranks and an all-reduce over all of them, each as a
// line through two sizes (seconds = latency + bytes / bandwidth).
#pragma once

namespace ppstage {

class Communicator;

struct LinkCosts {
  // One message from one rank to another: half a ping-pong's round trip between ranks 0
  // and 1.
  double p2p_latency_s = 0;
  double p2p_bytes_per_s = 0;
  // A sum over n ranks of `bytes` each, as a ring moves it: latency + 2 (n - 1) / n x
  // bytes / bandwidth, with the bandwidth measured over all the communicator's ranks.
  double allreduce_latency_s = 0;
  double allreduce_bytes_per_s = 0;
};

// Collective over `world`, which has at least two ranks: every rank takes part in the
// all-reduces, ranks 0 and 1 in the ping-pongs. Blocking; throws CommError when a peer
// does not answer in time. The figures are the same on every rank (rank 0's, broadcast).
LinkCosts measureLinks(Communicator& world);

}  // namespace ppstage
