// The bytes of a training step's all-reduce of losses, norms and figures (train/step_reduce.h):
// what the link probe times (comm/link_probe.h, LinkCosts::step_reduce_s) and the planner
// charges where the probe did not (plan/stage_costs.cpp), and what StepReduce::pack checks
// it packs.
#pragma once

#include <cstdint>

namespace ppstage {

// 14 doubles (loss, accuracy, norm, each compute kind's seconds and count, the compile
// counts, abandoned ranks) and 6 per rank (its slots).
constexpr int64_t stepReduceBytes(int64_t ranks) { return 8 * (14 + 6 * ranks); }

}  // namespace ppstage
