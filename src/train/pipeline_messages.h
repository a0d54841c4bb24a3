// What a rank's executor sends its activations and gradients on, and the action list it
// runs, given the job's data communicator (JobCommunicators::data, train/trainer.h).
//
// Where `data` matches messages by tag (MPI, LocalGroup): `data` itself and the rank's
// lowered list as it is. Where it matches in posting order (NCCL): a channel per route
// between pipeline neighbours (comm/peer_channels.h, split from `data` for every replica
// and tensor-parallel rank at once) and the list with its receives in their sender's
// order (schedule/send_order.h). Note [NCCL's posting order] says why both are needed.
#pragma once

#include <memory>
#include <vector>

#include "ppstage/comm/communicator.h"
#include "ppstage/config/device.h"
#include "ppstage/core/topology.h"
#include "ppstage/schedule/schedule_api.h"

namespace ppstage {

struct PipelineMessages {
  std::unique_ptr<Communicator> channels;  // null: the messages go on `data` itself
  Communicator* comm = nullptr;            // what the executor posts on
  ActionList actions;                      // what it runs
};

// --comm.backend nccl (resolved: `device`): an NCCL communicator of `world`'s ranks on the
// rank's GPU, bootstrapped over `world`, for the pipeline's messages; null for mpi.
// Collective over `world`.
std::unique_ptr<Communicator> ncclDataCommunicator(Communicator& world, const RankDevice& device);

// Collective over `data` (world-sized) where it matches in posting order. `lowered`: every
// pipeline rank's list for `request`; `topology` is this rank's view.
PipelineMessages pipelineMessages(Communicator& data, const Topology& topology,
                                  const ScheduleRequest& request,
                                  const std::vector<ActionList>& lowered);

}  // namespace ppstage
