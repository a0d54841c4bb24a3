// The numbers ranks exchange during a run: one world all-reduce after every step
// (StepReduce) and one at the end (gatherOwnFigures: each rank's RankMetrics). Each is a
// typed struct; pack/unpack turn it into the flat double tensor the all-reduce sums, and a
// rank fills in only what it knows, zeros elsewhere, so the sum is the job's value.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "ppstage/observe/metrics.h"
#include "ppstage/schedule/per_kind.h"

namespace ppstage {

class Communicator;

struct StepReduce {
  struct KindCost {
    double seconds = 0;
    double count = 0;
  };
  double loss = 0;             // the micro-batches' shares of the step's loss (last stage)
  double accuracy = 0;         // cross_entropy: the shares of targets predicted right
  double norm_squared = 0;     // shares of the squared gradient norm (GradientSync)
  PerCompute<KindCost> costs;  // compute seconds and count of every kind
  double graphs_compiled = 0;  // the compile caches' counts so far
  double respecializations = 0;
  // Ranks that abandoned the step to stop (Note [Abandoning a step]): where any did, no
  // rank applies it.
  double abandoned = 0;
  // One slot per rank; each rank fills its own.
  std::vector<double> busy_s;       // compute seconds
  std::vector<double> stop_signal;  // the signal that asked this rank to stop; 0: none
  // The first global micro-batch whose loss was NaN or inf on this rank, plus 1; 0: none.
  std::vector<double> nonfinite_microbatch;
  // The first of this rank's parameters whose gradient was NaN or inf, as
  // stage * kParameterSlots + parameter index + 1 (exact in a double); 0: none.
  std::vector<double> nonfinite_parameter;
  static constexpr double kParameterSlots = 1 << 20;
  // Tensor memory (observe/tensor_memory.h), MB: the peak of allocated tensor bytes during
  // the step's forwards and backwards, and that peak above what was allocated when the
  // step began (activations and gradients).
  std::vector<double> peak_allocated_mb;
  std::vector<double> peak_activation_mb;

  // Every per-rank slot sized for `world` ranks, zero.
  void sizeSlots(int world);

  // [loss, accuracy, norm_squared, seconds and count of F, B, I, W, graphs, respecializations,
  //  abandoned, busy_s..., stop_signal..., nonfinite_microbatch..., nonfinite_parameter...,
  //  peak_allocated_mb..., peak_activation_mb...] as one
  // double tensor, and back.
  at::Tensor pack() const;
  static StepReduce unpack(const at::Tensor& packed);
};

// Every rank's own figures (RankMetrics::forEachOwnFigure), in rank order: each rank puts
// `mine`'s into its slot of one all-reduce (collective over `world`). The other fields of
// the RankMetrics returned are left at their defaults.
std::vector<RankMetrics> gatherOwnFigures(Communicator& world, const RankMetrics& mine);

}  // namespace ppstage
