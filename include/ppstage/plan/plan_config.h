// plan: a chosen candidate as configuration: the [pipeline] and [train] options that run
// it (what `train --pipeline.auto` applies), and a config file of them with the user's own
// options (what `ppstage plan --write-config` writes and `train --config` reads unchanged).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/core/topology.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/planner.h"

namespace ppstage {

// What [plan] asks for over `ranks` ranks in tensor-parallel groups of `tp`: the budget,
// the schedules (--plan.schedules, or every one `registry` has), how many to keep
// (--plan.top) and the ranks' hosts: --plan.hosts N fills N hosts with ranks / N adjacent
// ranks each (as mpirun's default mapping does); 0 takes `job_hosts` (the job's, one per
// rank) where the plan is for the job's ranks, and one host otherwise. Throws
// ppstage::Error for a schedule `registry` does not know, listing those it does, for ranks
// that `tp` does not divide, and for hosts that do not divide the ranks.
PlanRequest planRequestOf(const PlanConfig& plan, int ranks, int tp,
                          const ScheduleRegistry& registry, const std::vector<int>& job_hosts = {});

// Throws ppstage::Error where `profile` (read from `source`) was measured at another
// tensor parallelism than `tp`: its units' seconds and bytes are another shard's.
void checkProfileTp(const CostProfile& profile, int tp, const std::string& source);

// The cut's split points: the module path of each stage's first unit after the first.
std::vector<std::string> splitPointsOf(const PlanCandidate& candidate, const CostProfile& profile);

// The candidate a run of `config` laid out as `pipeline` is (applyCandidate's inverse): its
// schedule, dp, pipeline ranks, tp, stages per rank, placement, micro-batches (as the run
// resolves them) and their size, whether it shards the optimizer, its rank order and what
// crosses between `pipeline`'s hosts (Topology::withHosts); no cut. Throws ppstage::Error
// where the batch does not divide into the replicas' micro-batches.
PlanCandidate candidateOf(const Config& config, const Topology& pipeline);

// --train.recompute_blocks for what `candidate` recomputes: its blocks per stage ("4,1").
std::string recomputeBlocksOf(const PlanCandidate& candidate);

// Why `candidate` recomputes what it does, one line per stage (none where it recomputes
// nothing): "stage 0: recomputes 4 of 4 blocks (full): it holds 2 micro-batches in flight,
// 40.1 MB each without recomputation, 6.2 MB with"; none for a candidate the planner did
// not choose so (one given to predictCandidate).
std::vector<std::string> recomputeReasons(const PlanCandidate& candidate,
                                          const CostProfile& profile);

// Why `candidate` shards its optimizer, one line; empty where it does not: "optimizer
// sharded over 4 replicas: 18.5 MB of state and fp32 masters on the largest rank instead
// of 49.5 MB, and 1/4 of its optimizer step" (gpt-small, AdamW, fp32).
std::string shardingReason(const PlanCandidate& candidate, const CostProfile& profile);

// What of `candidate`'s traffic crosses between hosts and what stays inside them, with
// what each costs over either link, one line: "ranks pp-dp-tp; across hosts: stage
// boundary 0->1 (0.25 MB a micro-batch each way: 10.80 ms between hosts, 0.12 ms inside
// one); inside hosts: data-parallel all-reduces (...)". For a plan over several hosts.
std::string hostsReason(const PlanCandidate& candidate, const CostProfile& profile);

// Sets what `candidate` chooses in `config`: the stages and their split points, schedule,
// micro-batches, stages per rank, placement, rank order, train.dp, train.shard_optimizer and, where
// it recomputes, train.recompute and train.recompute_blocks (otherwise they stay as given).
void applyCandidate(const PlanCandidate& candidate, const CostProfile& profile, Config& config);

// An INI file: `given` (the user's options by name, as parseOptions records them), less the
// ones the plan chooses and the plan's own, plus the candidate's (train.tp and
// train.shard_optimizer among them, and train.recompute and train.recompute_blocks where
// it recomputes) and
// the profile's batch size (what was planned for), by section. `header` becomes its leading
// comment lines.
std::string configIniOf(const std::map<std::string, std::string>& given,
                        const PlanCandidate& candidate, const CostProfile& profile,
                        const std::string& header);

}  // namespace ppstage
