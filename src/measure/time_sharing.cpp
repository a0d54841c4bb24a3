// See include/ppstage/measure/time_sharing.h, Note [Measuring the cost of time-sharing].
#include "ppstage/measure/time_sharing.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/statistics.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// A burst runs its block about this long; the first kSettleSeconds of a turn are not
// timed, while the ranks waiting for theirs still spin in the barrier (their first 100
// ms, MpiCommunicator::barrier).
constexpr double kBurstSeconds = 0.03;
constexpr double kSettleSeconds = 0.15;
constexpr int kTimed = 5;

// An MLP block at gpt-small's width over a micro-batch of 512 tokens (x [512, 256], the
// hidden [512, 1024]): its matrix products, activation, residual and norm, about 5 MB.
class Burst {
 public:
  Burst()
      : x_(at::randn({512, 256}, at::kFloat)),
        up_(at::randn({256, 1024}, at::kFloat) * 0.05),
        down_(at::randn({1024, 256}, at::kFloat) * 0.05) {}

  void runBlock() const {
    const at::Tensor hidden = at::gelu(at::mm(x_, up_));
    const at::Tensor out = at::layer_norm(at::mm(hidden, down_) + x_, {x_.size(1)});
    (void)out;
  }

  // Runs blocks for kSettleSeconds and sets how many make a burst of kBurstSeconds.
  void settle() {
    double fastest = 1e9;
    const Clock::time_point start = Clock::now();
    while (secondsSince(start) < kSettleSeconds) {
      const Clock::time_point block = Clock::now();
      runBlock();
      fastest = std::min(fastest, secondsSince(block));
    }
    blocks_ = std::max(1, static_cast<int>(std::ceil(kBurstSeconds / std::max(fastest, 1e-6))));
  }

  // The median over kTimed bursts, after one untimed.
  double medianSeconds() const {
    std::vector<double> times;
    for (int i = 0; i <= kTimed; ++i) {
      const Clock::time_point start = Clock::now();
      for (int b = 0; b < blocks_; ++b) runBlock();
      if (i > 0) times.push_back(secondsSince(start));
    }
    return median(times);
  }

 private:
  at::Tensor x_, up_, down_;
  int blocks_ = 1;
};

std::string timesText(const BurstTimes& times) {
  std::ostringstream out;
  out << std::setprecision(17) << times.alone_s << " " << times.together_s << " " << times.share;
  return out.str();
}

BurstTimes timesOf(const std::string& text) {
  BurstTimes times;
  std::istringstream in(text);
  in >> times.alone_s >> times.together_s >> times.share;
  return times;
}

}  // namespace

double timeSharingSlowdownOf(const std::vector<BurstTimes>& ranks) {
  double sum = 0;
  int sharing = 0;
  for (const BurstTimes& r : ranks) {
    if (r.share >= 1) continue;  // a core of its own at once too: nothing shared
    sum += r.together_s * r.share / r.alone_s;
    ++sharing;
  }
  return sharing == 0 ? 1.0 : std::max(1.0, sum / sharing);
}

double measureTimeSharingSlowdown(Communicator& world, const CpuLayout& cpus,
                                  const std::vector<int>& turns) {
  if (cpus.empty() || static_cast<int>(turns.size()) != world.size() ||
      static_cast<int>(cpus.machine_of_rank.size()) != world.size() || cpus.meanShare() >= 1 ||
      cpus.measuringShare(turns) < 1) {
    return 1;
  }
  const int rank = world.rank();
  const int turn_count = *std::max_element(turns.begin(), turns.end()) + 1;
  Burst burst;
  BurstTimes mine;
  mine.share = cpus.shareOf(rank);
  for (int turn = 0; turn < turn_count; ++turn) {
    if (turn == turns[static_cast<size_t>(rank)]) {
      burst.settle();
      mine.alone_s = burst.medianSeconds();
    }
    world.barrier();
  }
  mine.together_s = burst.medianSeconds();
  std::vector<BurstTimes> all;
  for (const std::string& text : allGatherStrings(world, timesText(mine))) {
    all.push_back(timesOf(text));
  }
  return timeSharingSlowdownOf(all);
}

}  // namespace ppstage
