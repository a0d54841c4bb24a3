// This rank's stages made runnable: sharded for tensor parallelism, then behind their compiled
// graphs.
// Internal to train/: job_setup.cpp assembles the setup from these.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ppstage/observe/metrics.h"
#include "ppstage/train/job_setup.h"

namespace ppstage {

// The torch device of `device`: cpu, or cuda:N.
at::Device torchDevice(const RankDevice& device);

// This rank's stages behind their compiled graphs (in `model`'s compile cache, made here);
// other ranks' stages drop their parameter copies, and master_values (bf16) keeps this
// rank's. On a GPU (`device`), each of this rank's stages moves there before it is compiled
// (Note [Placing stages]).
std::vector<LocalStage> compileLocalStages(const Config& config, const Topology& topology,
                                           const RankDevice& device, RankModel& model);

// --train.recompute in each stage of `split` (as compileLocalStages compiles them): the
// policy and the blocks that recompute. Throws ppstage::Error as ModelCompiler does.
std::vector<StageRecompute> recomputePerStage(const Config& config, const ModelSplit& split);

// --train.tp above 1: this rank's stages rewritten into its shards of them, in `group`
// (made here when null). Throws ppstage::Error when a region --train.tp_require names stays
// replicated.
void shardLocalStages(const Config& config, const Topology& topology, RankModel& model,
                      std::shared_ptr<TpGroup> group);

}  // namespace ppstage
