// GPipe: every rank runs the forwards of all micro-batches, then their backwards.
// Simple and bubble-equal to 1F1B, but every micro-batch's activations are alive at once.
#include "builtin_schedules.h"

namespace ppstage {

std::vector<ActionList> gpipeSchedule(const ScheduleRequest& request) {
  std::vector<ActionList> ranks(request.numRanks());
  for (int r = 0; r < request.numRanks(); ++r) {
    const std::vector<int> stages = request.stagesOf(r);
    for (int s : stages) {
      for (int m = 0; m < request.num_microbatches; ++m) ranks[r].push_back(forwardOf(s, m));
    }
    for (auto s = stages.rbegin(); s != stages.rend(); ++s) {
      for (int m = 0; m < request.num_microbatches; ++m) ranks[r].push_back(backwardOf(*s, m));
    }
  }
  return ranks;
}

}  // namespace ppstage
