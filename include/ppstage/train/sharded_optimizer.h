// --train.shard_optimizer: the optimizer's state sharded over the data-parallel replicas
// (ZeRO stage 1, Megatron's distributed optimizer).
//
// Note [Sharded optimizer state]
// A rank's trainable parameters are laid, in order, into buckets of at most
// kAllReduceBucketBytes of fp32 (core/all_reduce_buckets.h: the buckets the all-reduce sums
// in), each a flat row cut into one near-equal chunk per replica (comm/ring_all_reduce.h:
// the chunk a rank owns after a reduce-scatter). A step's gradients are flattened bucket by
// bucket and reduce-scattered (ringReduceScatterSum: each rank gets the sum of its chunk,
// added around the ring as the all-reduce adds it); the rank keeps an fp32 master of its
// chunk of every bucket and the optimizer's state for that chunk alone, steps it, and the
// updated chunks are all-gathered (ringAllGather) into every replica's parameters. Per rank
// the masters and the state are 1/dp of the unsharded ones; the gradients a step
// accumulates stay whole (stage 2 would shard them too). The clipping norm counts each
// element once: each rank its owned chunk, of the parameters that count (a tied tensor's
// first copy; a tensor held whole on every tensor-parallel rank on the first). AdamW and SGD
// update element by element, so a chunk steps as the whole tensor would.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/config/config.h"

namespace torch::optim {
class Optimizer;
}

namespace ppstage {

class Communicator;

class ShardedOptimizer {
 public:
  // `params`: this rank's trainable parameters (GradientSync::parameters' order), whose
  // .grad the step sums; `values`: their fp32 values, where the masters start (bf16's
  // master values, or the parameters themselves). `dp`: the data-parallel group (collectives
  // run over it; every member holds the same parameters' shapes in the same order), which
  // must outlive this object.
  ShardedOptimizer(const TrainConfig& train, std::vector<at::Tensor> params,
                   const std::vector<at::Tensor>& values, Communicator& dp);
  ~ShardedOptimizer();
  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;

  // Collective over dp: every parameter's .grad (undefined counts as zeros) summed over the
  // replicas into this rank's chunks. The parameters' own .grad are left partial. Those
  // `summed` marks (one flag per parameter) hold the replicas' sum already (tied copies):
  // they pass through the sum unchanged (the first replica's value, zeros from the rest).
  void reduceGradients(const std::vector<bool>& summed = {});

  // The squared norm of this rank's summed chunks, over the parameters `counts` (one flag
  // per parameter) says count.
  double squaredNormShare(const std::vector<bool>& counts) const;

  // Multiplies this rank's summed chunks by `factor` (clipping).
  void scale(double factor);

  // Steps this rank's masters at learning rate `lr`, then all-gathers the updated values
  // into every parameter (collective over dp) and drops every gradient.
  void step(double lr);

  // Drops every gradient without stepping (a skipped step).
  void clearGradients();

  // Collective over dp: every parameter's whole optimizer state, named as optimizerState
  // names it (runtime/optimizer.h; empty before the first step, and for SGD without
  // momentum), and its whole fp32 master value.
  struct WholeState {
    std::vector<std::map<std::string, at::Tensor>> state;
    std::vector<at::Tensor> masters;
  };
  WholeState gatherState();

  // Sets this rank's chunks from every parameter's whole `state` and fp32 `masters` (what
  // gatherState returned, possibly at another dp), and the parameters from the masters.
  void loadState(const WholeState& whole);

  // Bytes this rank keeps for the optimizer: its chunks' state (AdamW's moments, SGD's
  // momentum), and its fp32 masters of them.
  int64_t stateBytes() const;
  int64_t masterBytes() const;

 private:
  struct Bucket;
  std::vector<at::Tensor> params_;
  Communicator& dp_;
  std::vector<Bucket> buckets_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace ppstage
