// --pipeline.balance time, the runtime's half: what each splittable unit costs, measured on
// the run's own micro-batch with its training loss, and the step the schedule's simulator
// predicts for a candidate cut. The splitter plans with these (split::UnitTimes) and
// measures nothing itself: params and FLOPs are estimates, and a wide LM head or attention
// over long sequences costs more than either says.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/core/topology.h"
#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/split/stage_plan.h"
#include "ppstage/split/units.h"

namespace ppstage {

// Seconds per unit, in unit order.
struct UnitSeconds {
  std::vector<double> forward;
  std::vector<double> backward;  // the gradients of its inputs and parameters
  double of(size_t unit) const { return forward.at(unit) + backward.at(unit); }
};

// How many times measureUnitSeconds runs the model (the median of these runs counts; the
// first one also warms up allocators and caches).
constexpr int kUnitProfileRuns = 3;

// The training loss of the model's first output (the last stage computes it, so the last
// unit's time includes it); empty: the backward starts from ones.
using UnitLoss = std::function<at::Tensor(const at::Tensor& output)>;

// `model` cut into one stage per unit, in unit order. Throws ppstage::Error, beginning with
// `why` (what runs the units alone), where a unit boundary cannot be cut (extractStages: a
// value that is not a tensor, and cannot be recomputed, would cross it).
std::vector<StageModule> unitStages(const ModelGraph& model, const std::vector<SplitUnit>& units,
                                    const ValueShapes& shapes, const std::string& why);

// The run's loss of kind `kind` against placeholder targets (class 0, or zeros: the work is
// the same).
UnitLoss trainingLoss(LossKind kind);

// Cuts `model` once per unit and runs the units in order on `example_inputs` (one per
// model input), forward and
// backward with eager autograd, `runs` times, in this process on its intra-op threads.
// Returns each unit's median. Throws ppstage::Error where a unit boundary cannot be cut
// (extractStages: a value that is not a tensor, and cannot be recomputed, would cross it).
UnitSeconds measureUnitSeconds(const ModelGraph& model, const std::vector<SplitUnit>& units,
                               const ValueShapes& shapes,
                               const std::vector<at::Tensor>& example_inputs,
                               const UnitLoss& loss = {}, int runs = kUnitProfileRuns);

// One micro-batch of `captured`'s example inputs as a run of `config` over `pipeline` cuts
// its batch (batchLayout: the layout's replicas, and the schedule's micro-batches for its
// stages): what each action of the run computes on.
std::vector<at::Tensor> microBatchInputs(const CapturedModel& captured, const Config& config,
                                         const Topology& pipeline);

// Every unit of `captured` measured on microBatchInputs (time is not linear in the batch: a
// wide head's logits outgrow the caches), with the run's `loss` (runLossKind) against
// placeholder targets in the last unit.
UnitSeconds measureUnitSeconds(const CapturedModel& captured, const Config& config,
                               const Topology& pipeline, LossKind loss);

// What planStages balances by: the units' seconds, and the simulator's makespan of
// `config`'s schedule over a candidate cut into `pipeline`'s stages (per-stage F and B from
// the units, I and W half a B each; 0 where the schedule cannot be built for the cut).
UnitTimes unitTimesOf(const UnitSeconds& seconds, const PipelineConfig& config,
                      const Topology& pipeline);

// `ppstage split`: splitModel, measuring the units first (in this process) where `config`
// balances by time, as a run of config.pipeline.stages stages would cut its batch.
ModelSplit splitModelMeasuringTime(const Config& config);

}  // namespace ppstage
