// The lowering pass shared by every schedule: compute-only action lists -> lists with the
// SEND/RECV actions that move activations and gradients between ranks.
#pragma once

#include <vector>

#include "ppstage/schedule/schedule_api.h"

namespace ppstage {

// For each compute action whose producer or consumer stage runs on another rank: a RECV
// just before the compute that needs it (RECV_F before F, RECV_B before B or I), a SEND
// just after the compute that produces it (SEND_F after F, SEND_B after B or I). Adjacent
// stages on one rank hand tensors over directly: no action. Since SEND and RECV only post
// transfers and a compute waits for its own input only, neighbouring ranks never wait on
// each other's communication; whether the compute order itself can deadlock is the
// simulator's to decide. Lists that already hold communication actions are returned as
// they are.
std::vector<ActionList> lowerCommunication(const ScheduleRequest& request,
                                           const std::vector<ActionList>& compute);

}  // namespace ppstage
