// The planner's measurement (plan/cost_profile.h): every splittable unit of the model run
// on its own, forward, backward, and backward split into I and W, in the run's compile mode
// with its training loss in the last unit, at two micro-batch sizes; the tensor bytes it
// keeps alive per micro-batch (the counting allocator, observe/tensor_memory.h, when
// installed); its parameters; and the optimizer's time per trainable element. One process,
// on its intra-op threads: a rank of the planned run does the same work per micro-batch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/stage_module.h"

namespace ppstage {

class Communicator;

// Units measured as one rank of a tensor-parallel group holds them: `shard` rewrites each
// unit stage into this rank's share (train/ passes parallel/'s shardStage with the group,
// whose other ranks measure their shares at once: its collectives run as in the run).
struct UnitSharding {
  int tp = 1;
  std::function<void(StageModule& unit)> shard;  // empty at tp 1: units whole
};

// The two micro-batch sizes a plan for `ranks` ranks is measured at (Note [Costs per
// micro-batch size]): one sample, the smallest any candidate runs (two where one fails: a
// BatchNorm over a 1 x 1 map in training), and half a rank's share of the batch (at
// least 2), where the fastest candidates of a few ranks run; larger micro-batches
// extrapolate from the line through both.
std::vector<int64_t> measuredMicrobatchSizes(int64_t batch_size, int ranks);

// Measures `captured` (the run's capture of the model, on its data file's samples where
// it has one) with the run's loss of kind `loss`, in `config`'s compile mode, for a plan
// over `ranks` ranks; the link figures come from config.plan. With `sharding`, every unit
// is made this rank's share first, and measured as such (CostProfile::tp). Throws
// ppstage::Error where a unit boundary cannot be cut.
CostProfile measureCostProfile(const Config& config, const CapturedModel& captured, LossKind loss,
                               int ranks, const UnitSharding& sharding = {});

// `measure` (this rank's measureCostProfile) on every rank of `world`, in the turns
// `turns` gives (one per rank of `world`, from 0; empty: all at once): ranks that
// outnumber their machine's cores measure a few at a time, each on a core of its own, and
// the planner shares the cores among them where the run computes (Note [Ranks that share
// cores], src/schedule/action_costs.cpp). The profiles averaged (which also evens out one
// process's luck with its memory), and the links measured between the ranks
// (comm/link_probe.h), inside and between the hosts `host_of_rank` numbers (one per rank of
// `world`; empty: one host), named `host_names` in the probed pairs. With one rank (or no
// `world`): `measure` alone, the links as [plan] assumes them. Collective; every rank
// returns the same profile, and throws the same JobError when one rank cannot measure. The
// caller sets the compute threads a rank gets first.
CostProfile measureCostProfileOnRanks(const std::function<CostProfile()>& measure,
                                      Communicator* world,
                                      const std::vector<int>& host_of_rank = {},
                                      const std::vector<std::string>& host_names = {},
                                      const std::vector<int>& turns = {});

}  // namespace ppstage
