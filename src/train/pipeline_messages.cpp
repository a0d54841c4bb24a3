// See pipeline_messages.h.
#include "pipeline_messages.h"

#ifdef PPSTAGE_WITH_NCCL
#include "ppstage/comm/nccl_communicator.h"
#endif
#include "ppstage/comm/peer_channels.h"
#include "ppstage/core/error.h"
#include "ppstage/schedule/send_order.h"

namespace ppstage {

std::unique_ptr<Communicator> ncclDataCommunicator(Communicator& world, const RankDevice& device) {
  if (device.backend != CommBackend::kNccl) return nullptr;
#ifdef PPSTAGE_WITH_NCCL
  return NcclCommunicator::create(world.split(0, world.rank()), device.cuda_index, world.options());
#else
  PPSTAGE_INTERNAL_FAIL("--comm.backend nccl in a build without NCCL (config/device.h refuses it)");
#endif
}

PipelineMessages pipelineMessages(Communicator& data, const Topology& topology,
                                  const ScheduleRequest& request,
                                  const std::vector<ActionList>& lowered) {
  PipelineMessages out;
  const auto mine = static_cast<size_t>(topology.ppRank());
  if (!data.matchesInPostingOrder()) {
    out.comm = &data;
    out.actions = lowered.at(mine);
    return out;
  }
  PPSTAGE_INTERNAL_ASSERT(data.size() == topology.worldSize(), "a data communicator of ",
                          data.size(), " ranks for a job of ", topology.worldSize());
  std::vector<Route> routes;
  for (const auto& [from, to] : sendRoutes(request, lowered)) {
    for (int dp = 0; dp < topology.dpSize(); ++dp) {
      for (int tp = 0; tp < topology.tpSize(); ++tp) {
        routes.emplace_back(topology.worldRank(from, dp, tp), topology.worldRank(to, dp, tp));
      }
    }
  }
  out.channels = PeerChannels::create(data, std::move(routes));
  out.comm = out.channels.get();
  out.actions = receiveInSendOrder(request, lowered).at(mine);
  return out;
}

}  // namespace ppstage
