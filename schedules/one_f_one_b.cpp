// 1F1B: stage s runs warm-up forwards, then alternates one forward and one backward, then
// finishes the backwards. Note [1F1B warm-up]: stage s starts min(M, S - s - 1) forwards
// ahead, exactly enough for the first backward to arrive from the last stage as its
// warm-up ends; so at most min(M, S - s) micro-batches are alive on stage s, and the
// bubble is GPipe's, (S - 1) / (M + S - 1) of the run when a backward costs two forwards.
#include "builtin_schedules.h"

#include <algorithm>

namespace ppstage {

std::vector<ActionList> oneFOneBSchedule(const ScheduleRequest& request) {
  requireOneStagePerRank(request, "1f1b");
  const int S = request.num_stages, M = request.num_microbatches;
  std::vector<ActionList> ranks(S);
  for (int s = 0; s < S; ++s) {
    ActionList& list = ranks[request.rank_of_stage[s]];
    const int warmup = std::min(M, S - s - 1);
    for (int m = 0; m < warmup; ++m) list.push_back(forwardOf(s, m));
    for (int i = 0; i < M - warmup; ++i) {
      list.push_back(forwardOf(s, warmup + i));
      list.push_back(backwardOf(s, i));
    }
    for (int m = M - warmup; m < M; ++m) list.push_back(backwardOf(s, m));
  }
  return ranks;
}

}  // namespace ppstage
