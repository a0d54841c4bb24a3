// See include/ppstage/comm/link_probe.h.
#include "ppstage/comm/link_probe.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/message_tag.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/statistics.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// The two sizes each line goes through: small enough to be quick, large enough that the
// bandwidth shows (gradients and activations are megabytes).
constexpr int64_t kSmallBytes = 64 << 10;
constexpr int64_t kLargeBytes = 32 << 20;
// An all-reduce's small size: a gradient bucket's order of size, not a few numbers.
constexpr int64_t kSmallAllReduceBytes = 1 << 20;
// The first passes over 32 MiB fault its pages in and run 10-30x slower than the rest.
constexpr int kWarmUp = 4;
constexpr int kTimed = 7;

// Half the median round trip of `bytes` between ranks 0 and 1 (0 on other ranks).
double oneWaySeconds(Communicator& world, int64_t bytes) {
  const int rank = world.rank();
  if (rank > 1) return 0;
  const at::Tensor buffer = at::zeros({bytes / 4}, at::kFloat);
  const MessageTag tag = controlTag(ControlChannel::kLinkProbe);
  const int peer = 1 - rank;
  std::vector<double> trips;
  for (int i = 0; i < kWarmUp + kTimed; ++i) {
    const Clock::time_point start = Clock::now();
    if (rank == 0) {
      world.sendSync(buffer, peer, tag);
      world.recvSync(buffer, peer, tag);
    } else {
      world.recvSync(buffer, peer, tag);
      world.sendSync(buffer, peer, tag);
    }
    if (i >= kWarmUp) trips.push_back(secondsSince(start));
  }
  return median(trips) / 2;
}

// The median all-reduce of `bytes` over `world`, in four tensors (gradients come as many).
double allReduceSeconds(Communicator& world, int64_t bytes) {
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < 4; ++i) tensors.push_back(at::zeros({bytes / 16}, at::kFloat));
  std::vector<double> times;
  for (int i = 0; i < kWarmUp + kTimed; ++i) {
    world.barrier();
    const Clock::time_point start = Clock::now();
    world.allReduceSum(tensors);
    if (i >= kWarmUp) times.push_back(secondsSince(start));
  }
  return median(times);
}

// Latency and bandwidth of the line through (small_bytes, small_s) and (kLargeBytes,
// large_s), where `scale` multiplies the bytes moved.
void fitLine(int64_t small_bytes, double small_s, double large_s, double scale, double& latency,
             double& bandwidth) {
  const double bytes = scale * static_cast<double>(kLargeBytes - small_bytes);
  bandwidth = large_s > small_s ? bytes / (large_s - small_s) : bytes / std::max(large_s, 1e-9);
  latency = std::max(0.0, small_s - scale * static_cast<double>(small_bytes) / bandwidth);
}

}  // namespace

LinkCosts measureLinks(Communicator& world) {
  PPSTAGE_INTERNAL_ASSERT(world.size() >= 2, "measureLinks over ", world.size(), " rank");
  LinkCosts costs;
  fitLine(kSmallBytes, oneWaySeconds(world, kSmallBytes), oneWaySeconds(world, kLargeBytes), 1.0,
          costs.p2p_latency_s, costs.p2p_bytes_per_s);
  const double ring = 2.0 * (world.size() - 1) / world.size();
  fitLine(kSmallAllReduceBytes, allReduceSeconds(world, kSmallAllReduceBytes),
          allReduceSeconds(world, kLargeBytes), ring, costs.allreduce_latency_s,
          costs.allreduce_bytes_per_s);
  // Rank 0 measured the ping-pong: its figures are everyone's.
  std::ostringstream out;
  out << std::setprecision(17) << costs.p2p_latency_s << " " << costs.p2p_bytes_per_s << " "
      << costs.allreduce_latency_s << " " << costs.allreduce_bytes_per_s;
  std::string text = out.str();
  world.broadcast(text, 0);
  std::sscanf(text.c_str(), "%lf %lf %lf %lf", &costs.p2p_latency_s, &costs.p2p_bytes_per_s,
              &costs.allreduce_latency_s, &costs.allreduce_bytes_per_s);
  return costs;
}

}  // namespace ppstage
