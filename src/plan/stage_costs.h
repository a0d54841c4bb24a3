// plan's model of one candidate's stages (Note [Planning a pipeline], planner.h): what a
// cut's stages cost at one micro-batch size, with what they recompute (Note
// [Recomputation in the plan]), and the prediction a simulation of them makes: the step's
// tail and each rank's peak memory. Shared by the planner's search and its recomputation.
#pragma once

#include <string>
#include <vector>

#include "ppstage/core/topology.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"

namespace ppstage {

// What the stages of one cut cost at one micro-batch size.
struct StageCosts {
  std::vector<PerCompute<double>> compute;   // per stage
  std::vector<double> activation_bytes;      // per stage, one micro-batch
  std::vector<double> weight_pending_bytes;  // per stage, one micro-batch between I and W
  // Per stage: what its backward holds above one micro-batch's kept bytes at most (Note
  // [A stage's backward peak], stage_costs.cpp).
  std::vector<double> backward_peak_bytes;
  std::vector<double> input_backward_peak_bytes;  // the same for an I: no weight gradients
  std::vector<double> parameter_bytes;            // per stage (gradients and state: per element)
  std::vector<double> trainable_elements;         // per stage
  // Per stage: the weights' gradients one backward makes (in the parameters' dtype), and
  // the accumulated ones that appear with its first backward (fp32; 0 in bf16, whose fp32
  // accumulators exist from the step's start, with the state of every trainable element).
  std::vector<double> new_gradient_bytes;
  std::vector<double> accumulated_gradient_bytes;
  // Per stage: one micro-batch's message in (the previous stage's outputs; 0 for the first)
  // and out (its outputs, whose gradients come back; 0 for the last).
  std::vector<double> input_bytes;
  std::vector<double> output_bytes;
};

// The units a stage may start at, the first (0) included: a split point names a module by
// its path, and a module called twice (one embedding for a source and a target) names its
// first call, so a later call of a path already seen cannot start a stage.
std::vector<size_t> possibleStarts(const CostProfile& profile);

// The stages `starts` cuts (the first unit of each after the first) at micro-batches of
// `size`, each unit under `recompute`'s policy where it is among its stage's first
// `recompute.units[s]` units holding blocks (null or none: nothing recomputes).
StageCosts stageCostsOf(const CostProfile& profile, const std::vector<size_t>& starts, double size,
                        const PlannedRecompute* recompute = nullptr);

// Whether `schedule` splits backwards into I and W (zero-bubble schedules).
bool splitsBackward(const PipelineSchedule& schedule);

// What one micro-batch holds alive on stage `s` between its F and its backward: its
// activations or, where backwards split, what waits for W if that is more.
double aliveBytes(const StageCosts& costs, int s, bool splits_backward);

// Each pipeline rank's peak memory under `schedule` in candidate `c` (its dp, and whether
// it shards the optimizer): its stages' parameters, gradients and state and
// its receive buffers (Note [Receive buffers in the peak]), and what its actions hold as
// they run (Note [A rank's memory through its actions]); with dp > 1, also the step's end,
// summing the gradients across replicas, when the activations are gone but a bucket's
// flat copy and the ring's receive buffer are alive (core/all_reduce_buckets.h).
std::vector<double> rankPeakBytes(const CostProfile& profile, const StageCosts& costs,
                                  const Topology& pipeline, const PipelineSchedule& schedule,
                                  const PlanCandidate& c);

// The simulator's costs of `costs`' stages, cut as candidate `c`: their F, B, I, W and each
// boundary's message, over the link between hosts where c.across_hosts says the boundary
// crosses them (Note [Links in the plan]), and c.shared_cores (Note [Ranks that share
// cores]).
ActionCosts actionCostsOf(const CostProfile& profile, const StageCosts& costs,
                          const PlanCandidate& c);

// Fills `c`'s prediction from `simulation`, of `schedule` under `costs`: its makespan, the
// tail (a rank's optimizer, the all-reduce of its gradients and the sum of its tied
// weights' copies, the largest rank's; on shared cores what the ranks' tails, simulated
// inside the step, add to the makespan), step,
// bubble, peak, tokens/s and the micro-batches in flight per stage.
void fillPrediction(const CostProfile& profile, const StageCosts& costs, const Topology& pipeline,
                    const PipelineSchedule& schedule, const SimulationResult& simulation,
                    PlanCandidate& c);

}  // namespace ppstage
