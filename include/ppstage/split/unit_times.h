// split::unit_times: what each splittable unit costs to run, measured, for
// --pipeline.balance time (params and FLOPs are estimates; a wide LM head or attention over
// long sequences costs more than either says).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"
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

// Cuts `model` once per unit and runs the units in order on `example_input` (the runtime
// gives one micro-batch of the example input), forward and backward with eager autograd, `runs`
// times, in this process on its intra-op threads. Returns each unit's median. Throws ppstage::Error
// where a unit boundary cannot be cut (extractStages: a value that is not a tensor, and
// cannot be recomputed, would cross it).
UnitSeconds measureUnitSeconds(const ModelGraph& model, const std::vector<SplitUnit>& units,
                               const ValueShapes& shapes, const at::Tensor& example_input,
                               const UnitLoss& loss = {}, int runs = kUnitProfileRuns);

}  // namespace ppstage
