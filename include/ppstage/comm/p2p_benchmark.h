// Point-to-point micro-benchmark: MpiCommunicator against a raw MPI_Send/MPI_Recv loop of
// the same bytes, in the same run (`ppstage bench-comm`, docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <vector>

namespace ppstage {

class MpiCommunicator;

struct P2pBenchOptions {
  int64_t min_bytes = 4 << 10;     // sizes go up by 4x from here ...
  int64_t max_bytes = 64 << 20;    // ... to here
  double seconds_per_size = 0.05;  // per block, roughly
  int rounds = 9;                  // blocks per method, alternating; the median counts
};

struct P2pBenchRow {
  int64_t bytes = 0;
  int iterations = 0;  // ping-pongs per round
  double ours_s = 0;   // one-way time of one message, median block
  double raw_s = 0;
};

// Ping-pong between world ranks 0 and 1 (other ranks wait). Collective over `comm`.
// Returns the rows on rank 0, nothing elsewhere.
std::vector<P2pBenchRow> runP2pBenchmark(MpiCommunicator& comm, const P2pBenchOptions& options);

}  // namespace ppstage
