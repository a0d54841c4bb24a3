// Receives in their sender's order: the pass that makes every rank post its receives from
// a peer in the order that peer posts the sends, for communicators that match messages in
// posting order (NCCL; Note [NCCL's posting order] in comm/in_order_communicator.h).
//
// Between two ranks several boundaries can share one direction: with two stages per rank,
// rank 0 sends rank 1 the activations of stages 0 -> 1 and 2 -> 3 (interleaved), or the
// activations of 0 -> 1 and the gradients of 3 -> 2 (zb-v, placed in a V). The lowering
// orders each rank's SENDs by its own compute and its RECVs by its own, so the k-th send
// from rank a to rank b need not be the message of b's k-th receive from a. Matched by
// tag that is harmless; matched in posting order it delivers the wrong message or hangs.
// The pass moves each RECV no later than where the lowering put it: a RECV whose message
// the sender sends after others not yet received by then takes those RECVs with it, in
// the sender's order. RECVs only post receives, so no compute moves; receive buffers
// follow the list (early_receives.h sizes the pools from it).
#pragma once

#include <utility>
#include <vector>

#include "ppstage/schedule/schedule_api.h"

namespace ppstage {

// Every pipeline rank's `lowered` list (for `request`), with the RECVs from each peer in
// that peer's SEND order. Lists whose receives are already in order come back unchanged.
std::vector<ActionList> receiveInSendOrder(const ScheduleRequest& request,
                                           const std::vector<ActionList>& lowered);

// Every (sender, receiver) pair of pipeline ranks that `lowered` sends a message along,
// sorted: the routes of comm/peer_channels.h.
std::vector<std::pair<int, int>> sendRoutes(const ScheduleRequest& request,
                                            const std::vector<ActionList>& lowered);

}  // namespace ppstage
