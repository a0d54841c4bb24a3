// ZB-V (zero bubble in a V, "Pipeline Parallelism with Controllable Memory", Qi et al. 2024;
// torch.distributed.pipelining's ScheduleZBVZeroBubble has its shape): 2P stages on P ranks
// placed in a V, rank r holding stage r on the way down and stage 2P-1-r on the way up,
// every backward split into I and W.
//
// Note [ZB-V order]
// ~~~~~~~~~~~~~~~~~
// With d = the rank's down stage (r) and u = its up stage (2P-1-r), rank r runs
//   warm-up    2(P-r)-1 F of d; r pairs (F u, F d); P-r triples (F u, I u, W u)
//   steady     (F d, I d, W d, F u, I u, W u) while forwards are left (an F is dropped once
//              all M are done)
//   cool-down  r pairs (I d, I u); P-r pairs (I d, W d); then the W's left, u's then d's
// Rank 0 holds both the first and the last stage, so a micro-batch's backward starts on
// the rank its forward began on. Stage s holds at most 2P - s micro-batches (as 1F1B's
// stage s over the same 2P stages), with one rank's two stages together at most 1F1B's
// first stage plus one. In steady state each rank alternates its two stages with one F, I
// and W of each, so with F = I = W the ranks idle only in the warm-up ramp, and the last
// W's fill the cool-down: under half of interleaved 1F1B's bubble on the same stages
// (tests/unit/schedule_test.cpp). Fewer than 2P - 1 micro-batches are
// scheduled as if there were 2P - 1, and the actions of those that do not exist dropped.
#include "builtin_schedules.h"

#include <algorithm>

namespace ppstage {
namespace {

// One rank's order over a (padded) count of micro-batches: how many F, I and W of each of
// its two stages it has issued.
class VRank {
 public:
  // `scheduled` micro-batches are ordered, of which the first `existing` are emitted.
  VRank(int down, int up, int scheduled, int existing, ActionList& out)
      : down_(down), up_(up), scheduled_(scheduled), existing_(existing), out_(out) {}

  void forward(bool up) { add(forwardOf(stage(up), f_[up]++)); }
  void inputGrad(bool up) { add(inputGradOf(stage(up), i_[up]++)); }
  void weightGrad(bool up) { add(weightGradOf(stage(up), w_[up]++)); }
  bool forwardsLeft(bool up) const { return f_[up] < scheduled_; }
  bool weightsLeft(bool up) const { return w_[up] < i_[up]; }

 private:
  int stage(bool up) const { return up ? up_ : down_; }
  void add(const Action& a) {
    if (a.microbatch < existing_) out_.push_back(a);
  }

  int down_, up_, scheduled_, existing_;
  ActionList& out_;
  int f_[2] = {0, 0}, i_[2] = {0, 0}, w_[2] = {0, 0};
};

}  // namespace

std::vector<ActionList> zeroBubbleVSchedule(const ScheduleRequest& request) {
  const int P = request.numRanks(), M = request.num_microbatches;
  PPSTAGE_CHECK(request.stages_per_rank == 2, "zb-v runs two stages per rank ",
                "(--pipeline.stages_per_rank 2); got ", request.stages_per_rank);
  PPSTAGE_CHECK(request.placement == Placement::kV, "zb-v places stages in a V ",
                "(--pipeline.placement v); got loop");
  const int padded = std::max(M, 2 * P - 1);
  std::vector<ActionList> ranks(P);
  for (int r = 0; r < P; ++r) {
    VRank v(request.stageOf(r, 0), request.stageOf(r, 1), padded, M, ranks[r]);
    constexpr bool kDown = false, kUp = true;
    for (int k = 0; k < 2 * (P - r) - 1; ++k) v.forward(kDown);
    for (int k = 0; k < r; ++k) {
      v.forward(kUp);
      v.forward(kDown);
    }
    for (int k = 0; k < P - r; ++k) {
      v.forward(kUp);
      v.inputGrad(kUp);
      v.weightGrad(kUp);
    }
    // The up stage never runs ahead of the down one (the steady state begins with 2P-r-1
    // down forwards done against P up ones, and r <= P-1), so only the down stage's F can
    // run out first.
    while (v.forwardsLeft(kDown) || v.forwardsLeft(kUp)) {
      if (v.forwardsLeft(kDown)) v.forward(kDown);
      v.inputGrad(kDown);
      v.weightGrad(kDown);
      v.forward(kUp);
      v.inputGrad(kUp);
      v.weightGrad(kUp);
    }
    for (int k = 0; k < r; ++k) {
      v.inputGrad(kDown);
      v.inputGrad(kUp);
    }
    for (int k = 0; k < P - r; ++k) {
      v.inputGrad(kDown);
      v.weightGrad(kDown);
    }
    while (v.weightsLeft(kUp)) v.weightGrad(kUp);
    while (v.weightsLeft(kDown)) v.weightGrad(kDown);
  }
  return ranks;
}

}  // namespace ppstage
