// The cost of time-sharing a core (measure/time_sharing.h, Note [Measuring the cost of
// time-sharing]): the slowdown from the ranks' burst times, and its measurement over ranks
// as threads, the same on every rank, measured only where the threads outnumber the cores.
#include <gtest/gtest.h>

#include <vector>

#include "ppstage/measure/time_sharing.h"
#include "support/local_ranks.h"

namespace ppstage {
namespace {

// A rank at half a core that took 2.1x its time alone took 1.05x its share; the mean over
// the ranks that share a core (not one with a core of its own on another machine), and
// never below 1 (a rank cannot beat its share for long).
TEST(TimeSharing, SlowdownIsTheTimeTogetherOverTheShareOfACore) {
  EXPECT_DOUBLE_EQ(timeSharingSlowdownOf({{1.0, 2.1, 0.5}}), 1.05);
  EXPECT_DOUBLE_EQ(timeSharingSlowdownOf({{1.0, 2.1, 0.5}, {0.5, 1.25, 0.5}}), 1.15);
  EXPECT_DOUBLE_EQ(timeSharingSlowdownOf({{1.0, 2.1, 0.5}, {1.0, 1.0, 1.0}}), 1.05);
  EXPECT_DOUBLE_EQ(timeSharingSlowdownOf({{1.0, 1.8, 0.5}}), 1.0);
  EXPECT_DOUBLE_EQ(timeSharingSlowdownOf({{1.0, 1.0, 1.0}}), 1.0);
  EXPECT_DOUBLE_EQ(timeSharingSlowdownOf({}), 1.0);
}

// measureTimeSharingSlowdown on 2 ranks of one machine with `cores`, measuring in turns.
std::vector<double> measured(int cores) {
  const CpuLayout cpus = cpuLayoutOf({"m", "m"}, {cores, cores}, 1);
  const std::vector<int> turns = cpus.measuringTurns(1);
  std::vector<double> slowdown(2, 0);
  test::runRanks(2, [&](int rank, Communicator& world) {
    slowdown[static_cast<size_t>(rank)] = measureTimeSharingSlowdown(world, cpus, turns);
  });
  return slowdown;
}

TEST(TimeSharing, MeasuredOnlyWhereThreadsOutnumberCores) {
  const std::vector<double> shared = measured(1);
  EXPECT_GE(shared[0], 1.0);
  EXPECT_EQ(shared[0], shared[1]);
  EXPECT_EQ(measured(2), std::vector<double>({1.0, 1.0}));
}

}  // namespace
}  // namespace ppstage
