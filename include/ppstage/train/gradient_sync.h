// What happens to gradients between the executor's step and the optimizer's:
//   1. data parallel: every replica's gradients are summed over its dp group (the loss is
//      already scaled by 1/dp, so the sum is the mean);
//   2. tied parameters: the copies of one tensor on different stages (an embedding and the
//      LM head) get the sum of all copies' gradients, so identical updates keep them equal;
//   3. the global gradient norm over all stages, each tensor counted once, for clipping
//      (the squared norm of this rank's share; the caller all-reduces it).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <utility>
#include <vector>

#include "ppstage/split/stage_module.h"

namespace ppstage {

class Communicator;
class Topology;

class GradientSync {
 public:
  // Collective over `world` (it splits off the dp and tie groups: JobCommunicators::
  // collectives(), NCCL's where the data goes over NCCL). `stages` are this rank's; `ties`
  // the whole model's.
  GradientSync(Communicator& world, const Topology& topology, std::vector<StageModule*> stages,
               const std::vector<TiedParameter>& ties);
  ~GradientSync();

  // Steps 1 and 2. Undefined gradients become zeros first, so every rank contributes. With
  // `data_parallel` false, step 1 only for the tied copies (tiedParameters): the other
  // gradients' sum over the replicas is left to the caller (a sharded optimizer's
  // reduce-scatter, train/sharded_optimizer.h).
  void synchronize(bool data_parallel = true);

  // Per parameter (in parameters()' order), whether it is a copy of a tied tensor.
  std::vector<bool> tiedParameters() const;

  // The data-parallel group (null at dp 1): what a sharded optimizer shards over.
  Communicator* dataParallelGroup() const { return dp_group_.get(); }

  // Per parameter (in parameters()' order), whether its gradient counts in the global norm
  // on this rank whatever its replica: a tied tensor only on the stage of its first copy, a
  // tensor held whole on every tensor-parallel rank only on the first, a shard on each.
  std::vector<bool> countsInNorm() const;

  // This rank's share of the squared global gradient norm: its own parameters on dp rank 0,
  // a tied tensor only on the stage of its first copy, a tensor held whole on every
  // tensor-parallel rank only on the first, a shard on each; 0 on other replicas.
  double squaredNormShare() const;

  // The first of this rank's parameters (stage, index into its StageModule::parameters),
  // in stage order, whose gradient holds a NaN or inf; {-1, -1} when none does.
  std::pair<int, int> firstNonfiniteGradient() const;

  // Multiplies every gradient by `factor` (clipping).
  void scale(double factor);

  // The trainable parameters of this rank's stages, in stage order.
  std::vector<at::Tensor> parameters() const;

 private:
  struct TieGroup;
  const Topology& topology_;
  std::vector<StageModule*> stages_;
  std::unique_ptr<Communicator> dp_group_;
  std::vector<TieGroup> ties_;
};

// clip_grad_norm_'s coefficient: min(1, max_norm / (norm + 1e-6)); 1 when max_norm is 0.
double clipCoefficient(double norm, double max_norm);

}  // namespace ppstage
