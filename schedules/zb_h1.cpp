// ZB-H1 (zero bubble, "Zero Bubble Pipeline Parallelism", Qi et al. 2023): 1F1B with each
// backward split into I (gradient of the stage input, on the critical path) and W
// (gradient of the weights, off it).
//
// Note [ZB-H1 deferred weight gradients]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Stage s runs 1F1B's order with I in place of B, and runs the W of micro-batch m right
// after the I of micro-batch m + s; the last s W's close the schedule. The backward chain
// from the last stage to the first then costs one I per stage instead of a full B, and the
// deferred W's fill the cool-down, where 1F1B idles. Stage s keeps s more micro-batches
// alive than in 1F1B, which makes S - s + s = S on every stage: the peak is 1F1B's peak
// (on its first stage). With F = I = W the idle time is a third of 1F1B's.
#include "builtin_schedules.h"

#include <algorithm>

namespace ppstage {

std::vector<ActionList> zeroBubbleH1Schedule(const ScheduleRequest& request) {
  requireOneStagePerRank(request, "zb-h1");
  const int S = request.num_stages, M = request.num_microbatches;
  PPSTAGE_CHECK(M >= S, "zb-h1 needs at least as many micro-batches as stages (", S,
                ") to fill its bubbles; got ", M, " (--pipeline.microbatches)");
  std::vector<ActionList> ranks(S);
  for (int s = 0; s < S; ++s) {
    ActionList& list = ranks[request.rank_of_stage[s]];
    const int warmup = std::min(M, S - s - 1);
    int weights_done = 0;
    auto inputGrad = [&](int m) {
      list.push_back(inputGradOf(s, m));
      if (m - s >= 0) list.push_back(weightGradOf(s, weights_done++));  // See Note above
    };
    for (int m = 0; m < warmup; ++m) list.push_back(forwardOf(s, m));
    for (int i = 0; i < M - warmup; ++i) {
      list.push_back(forwardOf(s, warmup + i));
      inputGrad(i);
    }
    for (int m = M - warmup; m < M; ++m) inputGrad(m);
    while (weights_done < M) list.push_back(weightGradOf(s, weights_done++));
  }
  return ranks;
}

}  // namespace ppstage
