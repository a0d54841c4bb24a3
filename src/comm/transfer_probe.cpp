// See include/ppstage/comm/transfer_probe.h.
#include "ppstage/comm/transfer_probe.h"

#include <algorithm>
#include <chrono>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/message_tag.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/statistics.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// Every tensor of `buffers` to (or from) `peer` across the boundary in front of `stage`,
// all posted, then waited for.
void exchange(Communicator& comm, const std::vector<at::Tensor>& buffers, int stage, int peer,
              bool send) {
  std::vector<std::shared_ptr<Work>> works;
  for (size_t i = 0; i < buffers.size(); ++i) {
    MessageTag tag = controlTag(ControlChannel::kTransferProbe);
    tag.stage = stage;
    tag.tensor = static_cast<int>(i);
    works.push_back(send ? comm.send(buffers[i], peer, tag) : comm.recv(buffers[i], peer, tag));
  }
  for (const auto& work : works) work->wait(comm.options().timeout);
}

// Half the median round trip of `link`'s tensors (the sender's measure), or 0 at the
// receiving end, which only answers.
double pingPong(Communicator& comm, const BoundaryLink& link, int64_t microbatch_size,
                int64_t length, int round_trips) {
  constexpr int kWarmUp = 2;
  const std::vector<at::Tensor> buffers =
      allocateReceiveBuffers(link.spec, microbatch_size, length);
  for (at::Tensor t : buffers) t.zero_();
  std::vector<double> trips;
  for (int i = 0; i < kWarmUp + round_trips; ++i) {
    const auto start = Clock::now();
    exchange(comm, buffers, link.stage, link.peer, !link.receiver);
    exchange(comm, buffers, link.stage, link.peer, link.receiver);
    if (i >= kWarmUp) trips.push_back(secondsSince(start));
  }
  return link.receiver ? 0 : median(trips) / 2;
}

}  // namespace

TransferSeconds measureTransfers(Communicator& comm, std::vector<BoundaryLink> links,
                                 int64_t microbatch_size, int64_t length, int round_trips) {
  std::sort(links.begin(), links.end(),
            [](const BoundaryLink& a, const BoundaryLink& b) { return a.stage < b.stage; });
  TransferSeconds total;
  for (const BoundaryLink& link : links) {
    const double seconds = pingPong(comm, link, microbatch_size, length, std::max(round_trips, 1));
    if (link.receiver) continue;
    total.sum += seconds;
    ++total.count;
  }
  return total;
}

}  // namespace ppstage
