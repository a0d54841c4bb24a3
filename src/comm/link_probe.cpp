// See include/ppstage/comm/link_probe.h, Note [Probing the links of a job].
#include "ppstage/comm/link_probe.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/comm/message_tag.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/statistics.h"
#include "ppstage/core/step_reduce_size.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// A message line's smaller size, and an all-reduce's (a gradient bucket's order of size,
// not a few numbers).
constexpr int64_t kSmallBytes = 64 << 10;
constexpr int64_t kSmallAllReduceBytes = 1 << 20;
// The larger size's bounds, and the time it should take at the smaller size's bandwidth.
constexpr int64_t kLeastLargeBytes = 1 << 20;
constexpr int64_t kMostLargeBytes = 32 << 20;
constexpr double kLargeSeconds = 0.1;
// The first passes over 32 MiB fault its pages in and run 10-30x slower than the rest.
constexpr int kWarmUp = 4;
constexpr int kTimed = 7;

// The larger size of a line whose smaller size moved `small_bytes` (scaled) in `small_s`:
// about kLargeSeconds' worth, a multiple of 64 bytes (four float tensors).
int64_t largeBytesAfter(int64_t small_bytes, double small_s) {
  const double bandwidth = static_cast<double>(small_bytes) / std::max(small_s, 1e-9);
  const auto bytes = static_cast<int64_t>(bandwidth * kLargeSeconds);
  return std::clamp<int64_t>(bytes, kLeastLargeBytes, kMostLargeBytes) / 64 * 64;
}

// Half the median round trip of `bytes` between `self` and `peer`; `self` < `peer` starts.
double oneWaySeconds(Communicator& world, int peer, int64_t bytes) {
  const at::Tensor buffer = at::zeros({bytes / 4}, at::kFloat);
  const MessageTag tag = controlTag(ControlChannel::kLinkProbe);
  const bool starts = world.rank() < peer;
  std::vector<double> trips;
  for (int i = 0; i < kWarmUp + kTimed; ++i) {
    const Clock::time_point start = Clock::now();
    if (starts) {
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

// Latency and bandwidth of the line through (small_bytes, small_s) and (large_bytes,
// large_s), where `scale` multiplies the bytes moved.
LinkLine fitLine(int64_t small_bytes, double small_s, int64_t large_bytes, double large_s,
                 double scale) {
  LinkLine line;
  const double bytes = scale * static_cast<double>(large_bytes - small_bytes);
  line.bytes_per_s =
      large_s > small_s ? bytes / (large_s - small_s) : bytes / std::max(large_s, 1e-9);
  line.latency_s =
      std::max(0.0, small_s - scale * static_cast<double>(small_bytes) / line.bytes_per_s);
  return line;
}

// The line of messages between this rank and `peer` (both call it). The lower rank picks
// the larger size and sends it, so that both move the same bytes.
LinkLine messageLine(Communicator& world, int peer) {
  const double small_s = oneWaySeconds(world, peer, kSmallBytes);
  at::Tensor size = at::full({1}, largeBytesAfter(kSmallBytes, small_s), at::kLong);
  const MessageTag tag = controlTag(ControlChannel::kLinkProbe);
  if (world.rank() < peer) {
    world.sendSync(size, peer, tag);
  } else {
    world.recvSync(size, peer, tag);
  }
  const int64_t large = size.item<int64_t>();
  return fitLine(kSmallBytes, small_s, large, oneWaySeconds(world, peer, large), 1.0);
}

// An all-reduce of `bytes` over `group`, in four tensors (gradients come as many): the
// median over repetitions of the time its slowest rank took, on every rank of `group`. A
// step waits for its slowest rank, and over a shared link a different rank is the slowest
// each time: over 2 hosts' 200 Mbit/s, 2 groups summing 12.9 MB at once, the slowest
// rank's own median was 1.36 s and the median of the slowest 1.43 s (docs/benchmarks.md).
double allReduceSeconds(Communicator& group, int64_t bytes) {
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < 4; ++i) tensors.push_back(at::zeros({bytes / 16}, at::kFloat));
  std::ostringstream mine;
  mine << std::setprecision(17);
  for (int i = 0; i < kWarmUp + kTimed; ++i) {
    group.barrier();
    const Clock::time_point start = Clock::now();
    group.allReduceSum(tensors);
    if (i >= kWarmUp) mine << secondsSince(start) << " ";
  }
  std::vector<std::vector<double>> times;
  for (const std::string& text : allGatherStrings(group, mine.str())) {
    std::istringstream in(text);
    times.emplace_back(std::istream_iterator<double>(in), std::istream_iterator<double>());
  }
  return medianOfSlowest(times);
}

// The all-reduce line of `group` (at least two ranks), the same on every rank of it: each
// computes it from the same gathered times, so all agree on the larger size. Its latency is
// that of 2 ranks: the ring's 2 (n - 1) steps each pay a message's, so a group of n pays n - 1
// times as much (CostProfile::allReduceSeconds).
LinkLine allReduceLine(Communicator& group) {
  const double ring = 2.0 * (group.size() - 1) / group.size();
  const double small_s = allReduceSeconds(group, kSmallAllReduceBytes);
  // What each rank sums, such that the ring moves about kLargeSeconds' worth.
  const auto moved = static_cast<double>(
      largeBytesAfter(static_cast<int64_t>(ring * kSmallAllReduceBytes), small_s));
  const int64_t large_bytes =
      std::max<int64_t>(static_cast<int64_t>(moved / ring) / 64 * 64, 2 * kSmallAllReduceBytes);
  LinkLine line = fitLine(kSmallAllReduceBytes, small_s, large_bytes,
                          allReduceSeconds(group, large_bytes), ring);
  line.latency_s /= group.size() - 1;
  return line;
}

// The slowest of `lines`: the most latency and the least bandwidth of those measured.
LinkLine slowest(const std::vector<LinkLine>& lines) {
  LinkLine out;
  for (const LinkLine& line : lines) {
    if (!line.measured()) continue;
    out.latency_s = std::max(out.latency_s, line.latency_s);
    out.bytes_per_s =
        out.measured() ? std::min(out.bytes_per_s, line.bytes_per_s) : line.bytes_per_s;
  }
  return out;
}

// The pairs to probe: the first two ranks of each host with two, then the first rank of
// host 0 with the first of each other host.
std::vector<std::pair<int, int>> pairsToProbe(const std::vector<int>& host_of_rank) {
  std::vector<std::vector<int>> ranks_of_host;
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    const auto host = static_cast<size_t>(host_of_rank[r]);
    if (ranks_of_host.size() <= host) ranks_of_host.resize(host + 1);
    ranks_of_host[host].push_back(static_cast<int>(r));
  }
  std::vector<std::pair<int, int>> pairs;
  for (const std::vector<int>& ranks : ranks_of_host) {
    if (ranks.size() >= 2) pairs.emplace_back(ranks[0], ranks[1]);
  }
  for (size_t b = 1; b < ranks_of_host.size(); ++b) {
    if (!ranks_of_host[0].empty() && !ranks_of_host[b].empty()) {
      pairs.emplace_back(ranks_of_host[0][0], ranks_of_host[b][0]);
    }
  }
  return pairs;
}

std::string lineText(const LinkLine& line) {
  std::ostringstream out;
  out << std::setprecision(17) << line.latency_s << " " << line.bytes_per_s;
  return out.str();
}

LinkLine lineOf(const std::string& text) {
  LinkLine line;
  std::istringstream in(text);
  in >> line.latency_s >> line.bytes_per_s;
  return line;
}

// Every rank's `mine` on every rank.
std::vector<LinkLine> gatherLines(Communicator& world, const LinkLine& mine) {
  std::vector<LinkLine> lines;
  for (const std::string& text : allGatherStrings(world, lineText(mine))) {
    lines.push_back(lineOf(text));
  }
  return lines;
}

// This rank's all-reduce line in the group of `color` (none where the group is alone).
LinkLine groupAllReduceLine(Communicator& world, int color) {
  const std::unique_ptr<Communicator> group = world.split(color, world.rank());
  return group->size() >= 2 ? allReduceLine(*group) : LinkLine{};
}

// LinkCosts::step_reduce_s, on every rank.
double stepReduceSeconds(Communicator& world) {
  const int64_t bytes = stepReduceBytes(world.size());
  return allReduceSeconds(world, (bytes + 15) / 16 * 16);
}

}  // namespace

LinkCosts measureLinks(Communicator& world, const std::vector<int>& host_of_rank) {
  PPSTAGE_INTERNAL_ASSERT(world.size() >= 2, "measureLinks over ", world.size(), " rank");
  std::vector<int> hosts = host_of_rank;
  if (hosts.empty()) hosts.assign(static_cast<size_t>(world.size()), 0);
  PPSTAGE_INTERNAL_ASSERT(static_cast<int>(hosts.size()) == world.size(), "hosts of ", hosts.size(),
                          " ranks in a world of ", world.size());
  LinkCosts costs;
  std::vector<LinkLine> inside, between;
  for (const auto& [first, second] : pairsToProbe(hosts)) {
    LinkLine mine;
    if (world.rank() == first) mine = messageLine(world, second);
    if (world.rank() == second) messageLine(world, first);
    // The first rank's figures, on every rank.
    const LinkLine line = gatherLines(world, mine).at(static_cast<size_t>(first));
    const int first_host = hosts[static_cast<size_t>(first)];
    const int second_host = hosts[static_cast<size_t>(second)];
    costs.pairs.push_back({first, second, first_host, second_host, line});
    (first_host == second_host ? inside : between).push_back(line);
  }
  costs.message = slowest(inside);
  costs.host_message = slowest(between);
  const int rank = world.rank();
  const int host = hosts[static_cast<size_t>(rank)];
  if (between.empty()) {
    costs.all_reduce = slowest(gatherLines(world, allReduceLine(world)));
  } else {
    // Inside: each host's ranks; between: the ranks with the same place on their hosts.
    costs.all_reduce = slowest(gatherLines(world, groupAllReduceLine(world, host)));
    const int place = static_cast<int>(std::count(hosts.begin(), hosts.begin() + rank, host));
    costs.host_all_reduce = slowest(gatherLines(world, groupAllReduceLine(world, place)));
  }
  // With one rank on every host nothing moves inside one: the lines between stand in.
  if (!costs.message.measured()) costs.message = costs.host_message;
  if (!costs.all_reduce.measured()) costs.all_reduce = costs.host_all_reduce;
  costs.step_reduce_s = stepReduceSeconds(world);
  return costs;
}

}  // namespace ppstage
