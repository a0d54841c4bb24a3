// See include/ppstage/observe/clock_alignment.h.
#include "ppstage/observe/clock_alignment.h"

#include <ATen/ATen.h>

#include <limits>
#include <string>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/observe/trace.h"

namespace ppstage {
namespace {

constexpr MessageTag kPing = controlTag(ControlChannel::kClockPing);
constexpr MessageTag kPong = controlTag(ControlChannel::kClockPong);

// Rank 0's side of the ping-pongs with `peer`: answers each ping with its clock.
void answerPings(Communicator& world, int peer, int round_trips) {
  at::Tensor ping = at::zeros({1}, at::kLong);
  for (int k = 0; k < round_trips; ++k) {
    world.recvSync(ping, peer, kPing);
    world.sendSync(at::full({1}, TraceRecorder::now(), at::kLong), peer, kPong);
  }
}

// The other side: the offset seen over the shortest round trip.
ClockAlignment sendPings(Communicator& world, int round_trips) {
  ClockAlignment best;
  best.round_trip_ns = std::numeric_limits<int64_t>::max();
  at::Tensor pong = at::zeros({1}, at::kLong);
  for (int k = 0; k < round_trips; ++k) {
    const int64_t sent = TraceRecorder::now();
    world.sendSync(at::full({1}, sent, at::kLong), 0, kPing);
    world.recvSync(pong, 0, kPong);
    const int64_t received = TraceRecorder::now();
    if (received - sent < best.round_trip_ns) {
      best.round_trip_ns = received - sent;
      best.offset_ns = pong.item<int64_t>() - (sent + (received - sent) / 2);
    }
  }
  return best;
}

}  // namespace

ClockAlignment alignClocks(Communicator& world, int round_trips) {
  PPSTAGE_INTERNAL_ASSERT(round_trips > 0, "alignClocks with ", round_trips, " round trips");
  ClockAlignment clock;
  for (int peer = 1; peer < world.size(); ++peer) {
    if (world.rank() == 0) answerPings(world, peer, round_trips);
    if (world.rank() == peer) clock = sendPings(world, round_trips);
  }
  std::string origin = world.rank() == 0 ? std::to_string(TraceRecorder::now()) : std::string();
  world.broadcast(origin, 0);
  clock.origin_ns = std::stoll(origin);
  return clock;
}

}  // namespace ppstage
