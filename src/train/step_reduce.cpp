// See step_reduce.h.
#include "step_reduce.h"

#include <ATen/ATen.h>

#include <type_traits>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/core/step_reduce_size.h"

namespace ppstage {
namespace {

// Calls `field` on every fixed-size number of a StepReduce in packing order: the one list
// pack() and unpack() share.
template <typename Reduce, typename Field>
void forEachStepNumber(Reduce& r, Field field) {
  field(r.loss);
  field(r.accuracy);
  field(r.norm_squared);
  for (auto& cost : r.costs) {
    field(cost.seconds);
    field(cost.count);
  }
  field(r.graphs_compiled);
  field(r.respecializations);
  field(r.abandoned);
}

// Calls `number` on every double of a rank's own figures, in forEachOwnFigure's order.
template <typename Metrics, typename Number>
void forEachOwnNumber(Metrics& r, Number number) {
  RankMetrics::forEachOwnFigure(r, [&](const char*, auto& value) {
    using Value = std::decay_t<decltype(value)>;
    if constexpr (std::is_arithmetic_v<Value>) {
      number(value);
    } else {
      for (auto& seconds : value) number(seconds);
    }
  });
}

// The per-rank slot vectors, in packing order.
template <typename Reduce, typename Slots>
void forEachSlotVector(Reduce& r, Slots slots) {
  slots(r.busy_s);
  slots(r.stop_signal);
  slots(r.nonfinite_microbatch);
  slots(r.nonfinite_parameter);
  slots(r.peak_allocated_mb);
  slots(r.peak_activation_mb);
}

// How many slot vectors forEachSlotVector lists.
int64_t slotVectors() {
  StepReduce empty;
  int64_t count = 0;
  forEachSlotVector(empty, [&](std::vector<double>&) { ++count; });
  return count;
}

int64_t ownNumbers() {
  const RankMetrics empty;
  int64_t count = 0;
  forEachOwnNumber(empty, [&](auto) { ++count; });
  return count;
}

}  // namespace

void StepReduce::sizeSlots(int world) {
  forEachSlotVector(*this,
                    [&](std::vector<double>& v) { v.assign(static_cast<size_t>(world), 0); });
}

at::Tensor StepReduce::pack() const {
  std::vector<double> flat;
  forEachStepNumber(*this, [&](double x) { flat.push_back(x); });
  forEachSlotVector(*this, [&](const std::vector<double>& v) {
    PPSTAGE_INTERNAL_ASSERT(v.size() == busy_s.size(), "per-rank slots of different sizes");
    flat.insert(flat.end(), v.begin(), v.end());
  });
  PPSTAGE_INTERNAL_ASSERT(
      static_cast<int64_t>(8 * flat.size()) == stepReduceBytes(static_cast<int64_t>(busy_s.size())),
      "a step's all-reduce of ", flat.size(), " doubles; the planner and the ",
      "link probe count stepReduceBytes");
  return at::tensor(flat, at::kDouble);
}

StepReduce StepReduce::unpack(const at::Tensor& packed) {
  StepReduce r;
  int64_t fixed = 0;
  forEachStepNumber(r, [&](double) { ++fixed; });
  const int64_t slot_vectors = slotVectors();
  PPSTAGE_INTERNAL_ASSERT(packed.numel() >= fixed && (packed.numel() - fixed) % slot_vectors == 0,
                          "a step's all-reduce of ", packed.numel(), " numbers; ", fixed,
                          " come before ", slot_vectors, " per-rank slot vectors");
  const int64_t world = (packed.numel() - fixed) / slot_vectors;
  const double* next = packed.data_ptr<double>();
  forEachStepNumber(r, [&](double& x) { x = *next++; });
  forEachSlotVector(r, [&](std::vector<double>& v) {
    v.assign(next, next + world);
    next += world;
  });
  return r;
}

std::vector<RankMetrics> gatherOwnFigures(Communicator& world, const RankMetrics& mine) {
  const int64_t numbers = ownNumbers();
  at::Tensor all = at::zeros({world.size() * numbers}, at::kDouble);
  double* slot = all.data_ptr<double>() + world.rank() * numbers;
  forEachOwnNumber(mine, [&](auto x) { *slot++ = static_cast<double>(x); });
  world.allReduceSum({all});
  std::vector<RankMetrics> ranks(static_cast<size_t>(world.size()));
  const double* next = all.data_ptr<double>();
  for (RankMetrics& r : ranks) {
    forEachOwnNumber(r, [&](auto& x) { x = static_cast<std::decay_t<decltype(x)>>(*next++); });
  }
  return ranks;
}

}  // namespace ppstage
