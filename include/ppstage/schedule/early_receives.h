// Receives posted ahead: the pass that moves each RECV of a lowered list as early as its
// receive buffers allow, so a message can arrive while the rank computes something else.
//
// The lowering (lowering.h) puts a RECV just before the compute that needs it, which is the
// schedule's contract and what the simulator checks. A RECV only posts a receive, so moving
// it earlier changes no dependency; what bounds it is memory. Every received tensor lands
// in a buffer of its pool, one pool per (stage, direction): RECV_F's activations and
// RECV_B's gradients of stage s. A buffer is taken when its RECV is posted and given back
// after the last action of its (stage, micro-batch) in the list (a B or W, or the SEND_B
// after them): until then the micro-batch's autograd graph may read it. Each pool holds
// the most buffers the list as lowered keeps at once (for activations that is the
// simulator's peak in-flight count of the stage), plus `extra_buffers`; a RECV moves ahead
// while a buffer of its pool is free at every action it passes.
#pragma once

#include <map>
#include <utility>

#include "ppstage/schedule/action.h"

namespace ppstage {

struct ReceivePosting {
  // Receive buffers per pool beyond what the list as given holds at once: how many
  // messages of a pool may be posted ahead of their turn.
  int extra_buffers = 1;
  // MPI and the local communicator match a message by tag, so a RECV may move ahead of
  // other SENDs and RECVs. NCCL matches in posting order: there the communication actions
  // keep their order and a RECV moves ahead of compute actions only.
  bool keep_communication_order = false;
};

// A pool of receive buffers: (stage, RECV_F or RECV_B).
using ReceivePool = std::pair<int, ActionKind>;

// Per pool, the most buffers `list` holds at once (a buffer held from its RECV to the
// last action of its (stage, micro-batch)).
std::map<ReceivePool, int> receiveBuffersHeld(const ActionList& list);

// `list` (one rank's lowered actions) with every RECV as early as its pool allows: the
// RECVs keep their order among themselves, and each pool holds at most
// receiveBuffersHeld(list) + extra_buffers at once. A list without RECVs comes back as it is.
ActionList postReceivesEarly(const ActionList& list, const ReceivePosting& posting);

}  // namespace ppstage
