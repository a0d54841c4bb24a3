// What time-sharing a core costs beyond the share it leaves a thread, measured on the job's
// own ranks (Note [Ranks that share cores] in src/schedule/action_costs.cpp).
//
// Note [Measuring the cost of time-sharing]
// Where a machine's ranks outnumber its cores, the planner's costs are measured in turns of
// a core per thread, and the simulator runs a rank that shares a core at its share of it
// (cores / the threads computing). A thread that time-shares a core takes longer than that:
// the threads evict each other's caches at every switch. Four copies of a 512 x 512 matrix
// product loop on 2 cores took 2.1x one copy alone, and 4 ranks of gpt-small on 2 cores
// stepped 1.0-1.2x the prediction without this (docs/benchmarks.md). So after the turns
// each rank times a burst of a transformer block's work (an MLP at gpt-small's width, its
// working set past a core's L2) alone in its turn and then with every rank at once; the
// slowdown is the mean over the ranks that share a core of the burst's time at once x the
// rank's share of a core then / its time alone, at least 1.
#pragma once

#include <vector>

#include "ppstage/core/cpu_layout.h"

namespace ppstage {

class Communicator;

// One rank's burst: the median seconds alone in its turn, with every rank at once, and its
// share of a core at once (CpuLayout::shareOf).
struct BurstTimes {
  double alone_s = 0;
  double together_s = 0;
  double share = 1;
};

// The mean over the `ranks` that share a core at once (share < 1) of together_s x share /
// alone_s, at least 1 (1 where none does): how many times longer than its share of a core
// predicts a thread computes while it time-shares one.
double timeSharingSlowdownOf(const std::vector<BurstTimes>& ranks);

// Collective over `world` (ranks on `cpus`' machines, measuring in `turns`:
// CpuLayout::measuringTurns, one per rank): timeSharingSlowdownOf the ranks' bursts, the
// same on every rank; 1 where no machine has more threads than cores, or where a turn did
// not give every thread a core. About a second. Throws CommError when a peer does not
// answer in time.
double measureTimeSharingSlowdown(Communicator& world, const CpuLayout& cpus,
                                  const std::vector<int>& turns);

}  // namespace ppstage
