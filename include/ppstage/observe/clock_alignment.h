// One clock for a trace's ranks: each rank's steady clock against rank 0's.
//
// Ranks on different machines have unrelated steady clocks (on one machine they agree).
// Rank 0 and each other rank exchange a few ping-pongs; for the one with the shortest
// round trip, rank 0's reading is taken to be the midpoint of the round trip, so the
// offset is known within half of that round trip (tens of microseconds over MPI). It is
// measured once, at start-up: across machines, clocks that drift apart during a long run
// are not corrected.
#pragma once

#include <cstdint>

namespace ppstage {

class Communicator;

struct ClockAlignment {
  int64_t offset_ns = 0;      // rank 0's clock minus this rank's
  int64_t round_trip_ns = 0;  // the shortest round trip the offset comes from; 0 on rank 0
  int64_t origin_ns = 0;      // rank 0's clock when the alignment ended: time 0 of the trace

  // A reading of this rank's clock as nanoseconds since the origin, on rank 0's clock.
  int64_t sinceOrigin(int64_t local_ns) const { return local_ns + offset_ns - origin_ns; }
};

// Collective over `world`: measures every rank's offset to rank 0 with `round_trips`
// ping-pongs each (one rank at a time), then broadcasts the origin. Blocks; throws
// CommError when a peer does not answer within the communicator's timeout.
ClockAlignment alignClocks(Communicator& world, int round_trips = 10);

}  // namespace ppstage
