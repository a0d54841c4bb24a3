// See step_reduce.h.
#include "step_reduce.h"

#include <ATen/ATen.h>

#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"

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
}

template <typename Summary, typename Field>
void forEachSummaryNumber(Summary& s, Field field) {
  field(s.peak_rss_mb);
  field(s.graphs_compiled);
  field(s.cache_hits);
  field(s.respecializations);
  field(s.specializations_per_graph);
  field(s.max_step_rss_mb);
  field(s.rss_growth_mb_per_100_steps);
  field(s.tensor_growth_mb_per_100_steps);
  field(s.open_fds_start);
  field(s.open_fds_end);
  field(s.fusion_groups);
  field(s.differentiable_graphs);
  for (auto& seconds : s.action_s) field(seconds);
  field(s.tail_s);
  for (auto& seconds : s.wait_s) field(seconds);
  field(s.receive_buffers_allocated);
  field(s.transfer_s);
  field(s.transfers);
  field(s.tp_s);
  field(s.tp_all_reduces);
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

int64_t summaryNumbers() {
  const RankSummary empty;
  int64_t count = 0;
  forEachSummaryNumber(empty, [&](double) { ++count; });
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

std::vector<RankSummary> RankSummary::gather(Communicator& world, const RankSummary& mine) {
  const int64_t numbers = summaryNumbers();
  at::Tensor all = at::zeros({world.size() * numbers}, at::kDouble);
  double* slot = all.data_ptr<double>() + world.rank() * numbers;
  forEachSummaryNumber(mine, [&](double x) { *slot++ = x; });
  world.allReduceSum({all});
  std::vector<RankSummary> ranks(static_cast<size_t>(world.size()));
  const double* next = all.data_ptr<double>();
  for (RankSummary& r : ranks) forEachSummaryNumber(r, [&](double& x) { x = *next++; });
  return ranks;
}

}  // namespace ppstage
