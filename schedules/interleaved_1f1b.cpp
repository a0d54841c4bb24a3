// Interleaved 1F1B (Megatron-LM): each of P ranks runs V stages (rank r: r, r+P, ...), and
// 1F1B runs over "virtual micro-batches": in groups of P micro-batches, the rank's first
// stage, then its second, ... forward; backwards go through the stages in reverse. Each
// rank first runs 2 (P - r - 1) + (V - 1) P warm-up forwards. The bubble shrinks V-fold:
// idle over compute is (P - 1) / (V M) when M is a multiple of P.
#include "builtin_schedules.h"

#include <algorithm>

namespace ppstage {

std::vector<ActionList> interleavedOneFOneBSchedule(const ScheduleRequest& request) {
  const int P = request.numRanks(), V = request.stages_per_rank, M = request.num_microbatches;
  PPSTAGE_CHECK(V >= 2, "interleaved-1f1b needs at least two stages per rank ",
                "(--pipeline.stages_per_rank); got ", V, "; with one use 1f1b");
  PPSTAGE_CHECK(request.placement == Placement::kLoop, "interleaved-1f1b places stages in a ",
                "loop; got --pipeline.placement v");
  PPSTAGE_CHECK(M >= P && M % P == 0, "interleaved-1f1b needs the micro-batches (", M,
                ") to be a multiple of the pipeline ranks (", P, ")");
  std::vector<ActionList> ranks(P);
  const int total = V * M;  // virtual micro-batches per rank
  for (int r = 0; r < P; ++r) {
    // k-th virtual micro-batch -> (stage, micro-batch)
    auto microbatch = [&](int k) { return k / (P * V) * P + k % P; };
    auto forward = [&](int k) { return forwardOf(request.stageOf(r, k / P % V), microbatch(k)); };
    auto backward = [&](int k) {
      return backwardOf(request.stageOf(r, V - 1 - k / P % V), microbatch(k));
    };
    ActionList& list = ranks[r];
    const int warmup = std::min(total, 2 * (P - r - 1) + (V - 1) * P);
    for (int k = 0; k < warmup; ++k) list.push_back(forward(k));
    for (int i = 0; i < total - warmup; ++i) {
      list.push_back(forward(warmup + i));
      list.push_back(backward(i));
    }
    for (int k = total - warmup; k < total; ++k) list.push_back(backward(k));
  }
  return ranks;
}

}  // namespace ppstage
