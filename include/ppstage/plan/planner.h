// plan: the planner. From a CostProfile and a number of ranks it picks the pipeline
// configuration a user would otherwise find with a grid of runs: the dp x pp layout, the
// schedule, micro-batches, stages per rank, placement and the cut. It reads costs and
// simulates; it never runs a model (measuring is measure/'s job, unit_costs.h).
//
// Note [Planning a pipeline]
// Candidates: every dp x pp layout of the ranks whose dp divides the batch (with --train.tp
// T, of the job's ranks over T: each is then a tensor-parallel group, whose units were
// measured sharded over T ranks at once, so T stays the user's); every schedule
// asked for; stages per rank 1 to 4 (in a loop, and in a V at 2); every micro-batch count
// that divides a replica's batch into micro-batches no smaller than the smallest size
// measured (the model did not run below it: a BatchNorm over one sample). A schedule that refuses a
// request (too few micro-batches, a layout it does not run) drops that candidate. Each candidate's
// cut is the exact min-max partition of the units' F + B seconds at its micro-batch size
// (split::balancedPartition; a stage starts only at a unit whose module path no earlier unit has,
// as a split point names a module called twice by its first call), its stages' F, B, I and W are
// their units' sums, and its message time is the largest boundary's output bytes over the link. Its
// step is the simulator's makespan under those costs plus the tail: the optimizer over the largest
// rank's trainable elements and the data-parallel all-reduce of its gradients (a ring: 2 (dp-1)/dp
// of their bytes). Its peak memory per rank is its stages' parameters and optimizer state, its
// receive buffers, and the most its action list holds as it runs: each F adds one micro-batch's
// activation bytes on its stage, an I turns them into what the micro-batch keeps until its W,
// a B or W frees them, a B or I holds its stage's backward peak on top (its units' own peaks and
// the weights' new gradients, which wait for the pass to end), and a stage's accumulated
// gradients appear with its first backward (src/plan/stage_costs.cpp: Notes [A stage's backward
// peak], [Receive buffers in the peak], [A rank's memory through its actions]). Each simulated
// candidate of at most 16 stages then gets its cut refined with the simulator as the objective:
// each boundary moved to the next possible start either way, in up to two passes, while the
// predicted step falls and the peak fits the budget. Simulating is what costs (a 64-stage schedule
// of 256 micro-batches takes a tenth of a second), so candidates are simulated in order of a lower
// bound on their step that holds for every cut (the average rank's compute, and one micro-batch's
// way through every unit and back, plus the average rank's tail), and the search stops when the
// bound passes the slowest of the best found (at least ten are kept, whatever is printed). Memory
// gets such a bound too (the average rank's parameters and state with one micro-batch in flight on
// every stage), which drops a candidate unsimulated. Candidates of one layout, cut and micro-batch
// count that predict exactly the same step and peak (GPipe and 1F1B of one micro-batch on one stage
// per rank) are listed once.
//
// Note [Recomputation in the plan]
// Under a budget, a simulated candidate whose peak is over it gets recomputation where the
// profile measured it (Note [Recomputation in the profile]), once under each policy
// measured, and keeps the faster that fits. Its cut, schedule and micro-batches stay; what
// it chooses is, per stage, how many of its first units that hold blocks recompute (as
// --train.recompute_blocks counts a stage's first blocks). While a rank is over the budget,
// its stages' next units are taken in order of the step time they add per byte they save:
// a unit saves its stage's peak in-flight micro-batches (the simulator's) times what it
// keeps less per micro-batch, and costs the micro-batches times what its backward takes
// more; units are added until the estimated savings cover the excess, then the candidate
// is simulated again under the new costs (the rerun lengthens B and I, which can move the
// peak in flight), until every rank fits or a rank has nothing left to recompute. Stage 0
// of 1F1B holds p micro-batches and the last stage one, so the first stages recompute
// first. One policy serves the whole run (--train.recompute is one); the memory bound
// that drops candidates unsimulated counts every unit's smallest kept bytes, and a budget
// nothing fits names the smallest peak found with every block recomputed.
//
// Note [Sharding in the plan]
// With dp > 1 a simulated candidate is predicted twice: its optimizer sharded over its
// replicas (--train.shard_optimizer, Note [Sharded optimizer state]) and not. The
// schedule's simulation is the same; what changes is what a rank keeps per trainable
// element (CostProfile::stateBytesPerElement: the fp32 gradient whole, the optimizer's
// state and an fp32 master 1/dp) and the step's tail (the optimizer steps 1/dp of the
// elements; the reduce-scatter and all-gather move what the all-reduce's two halves move).
// Sharded wins where it fits the budget and the other does not; both fitting, where it is
// predicted faster, or as fast and smaller; neither fitting, where it is smaller (less is
// left to recompute). With AdamW it is both smaller and faster, with fp32 SGD without
// momentum larger (its masters) but faster. It
// is chosen before the cut is refined and before recomputation: it costs no step time,
// recomputation does. gpt-small at pp 1 x dp 2, AdamW: 24.5 MB of state per rank instead
// of 49.0, 12.2 MB of masters, a tail of 0.039 s instead of 0.061 s.
//
// Note [Links in the plan]
// Where the request's ranks are on several hosts (a job across hosts, or --plan.hosts), each
// layout with both replicas and a pipeline is tried in both rank orders: dp-pp-tp, a
// pipeline's ranks adjacent, and pp-dp-tp, a stage's replicas adjacent. mpirun fills a host
// with adjacent ranks, so the first puts pipelines inside hosts and the data-parallel
// all-reduces between them, the second the reverse. Each candidate knows what of its
// traffic crosses hosts (hostCrossings of its layout on the request's hosts): a boundary
// whose stages are on two hosts in some replica costs the profile's message between hosts
// (the simulator's per-boundary comm), a data-parallel group on several hosts the
// all-reduce between hosts in the tail; all else costs the links inside a host. Tensor
// parallelism is innermost in both orders, inside a host wherever its groups fit one, and
// its all-reduces are in the units' measured seconds. The profile's links between hosts
// are the link probe's (comm/link_probe.h); a profile measured on one host has none, and
// charges traffic between hosts as inside. Over a slow link this keeps the all-reduces,
// which move every gradient, inside hosts and cuts the pipeline between them, which sends
// one activation per micro-batch (Megatron's rule of thumb), and finds where that rule is
// wrong: a model whose activations outweigh its gradients.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppstage/core/cpu_layout.h"
#include "ppstage/core/placement.h"
#include "ppstage/core/topology.h"
#include "ppstage/core/units.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/schedule/schedule_api.h"
#include "ppstage/schedule/simulator.h"

namespace ppstage {

struct PlanRequest {
  // The ranks a pipeline and its replicas lay out: the job's ranks over `tp`, since each
  // of them is a tensor-parallel group of `tp` ranks (the profile's units were measured
  // sharded so: CostProfile::tp).
  int ranks = 1;
  int tp = 1;
  // Per rank; 0: no budget. A candidate fits when its predicted peak leaves 3% of it free
  // (the prediction's error, measured: docs/benchmarks.md).
  double memory_budget_bytes = 0;
  std::vector<std::string> schedules;  // the schedules to try (registered names)
  int max_stages_per_rank = 4;
  int keep = 10;  // how many of the best candidates the plan returns (it searches ten or more)
  // The host of every rank of the job planned for (ranks x tp of them, numbered from 0);
  // empty: one host. On several, the planner places traffic by link (Note [Links in the
  // plan]).
  std::vector<int> host_of_rank;
  // The machines of those ranks and their cores (empty: not known, or a core for every
  // thread); where they share cores, each candidate is simulated so (Note [Ranks that share
  // cores]).
  CpuLayout cpus;
};

// What a candidate recomputes (Note [Recomputation in the plan]): one policy, and per
// stage the units and the blocks (what --train.recompute_blocks counts) that recompute.
struct PlannedRecompute {
  RecomputePolicy policy = RecomputePolicy::kNone;
  std::vector<int> units;   // per stage: its first units holding blocks that recompute
  std::vector<int> blocks;  // per stage: the blocks of those units
  // Per stage, the bytes one micro-batch keeps alive without and with the choice.
  std::vector<double> plain_bytes;
  std::vector<double> kept_bytes;

  bool any() const { return policy != RecomputePolicy::kNone; }
};

// One configuration and what the planner predicts for it.
struct PlanCandidate {
  std::string schedule;
  int dp = 1;
  int pp = 1;  // pipeline ranks
  int tp = 1;  // tensor-parallel ranks of each (the request's): dp x pp x tp ranks in all
  int stages_per_rank = 1;
  Placement placement = Placement::kLoop;
  int microbatches = 1;
  int64_t microbatch_size = 1;
  std::vector<size_t> stage_starts;  // the first unit of every stage after the first
  double makespan_s = 0;             // the simulator's, for the actions
  double tail_s = 0;                 // optimizer and gradient sums (stage_costs.h)
  double step_s = 0;                 // makespan + tail
  double bubble = 0;                 // the simulation's bubble fraction
  double peak_bytes = 0;             // the largest rank's predicted peak tensor memory
  double tokens_per_s = 0;
  std::vector<int> inflight;   // per stage: the simulator's peak micro-batches in flight
  PlannedRecompute recompute;  // none unless a budget needs it
  // --train.shard_optimizer (dp > 1 only): chosen where it fits the budget and is
  // predicted faster or as fast and smaller (Note [Sharding in the plan]).
  bool shard_optimizer = false;
  // --pipeline.rank_order, and what of the candidate's traffic it puts between hosts (the
  // request's; Note [Links in the plan]): charged at the profile's links between hosts.
  RankOrder rank_order = RankOrder::kReplicaMajor;
  HostCrossings across_hosts;
  // Where the request's CPU ranks share cores (Note [Ranks that share cores]): its
  // pipeline ranks' threads on each machine; empty where every thread has a core.
  SharedCores shared_cores;

  int stages() const { return pp * stages_per_rank; }
  // "zb-v dp1 pp2x2 v M4", "1f1b dp2 pp2 M8", "1f1b dp1 pp2 tp2 M4", "1f1b dp1 pp2 M8
  // full 4,1" (recomputing 4 blocks of stage 0, 1 of stage 1), "1f1b dp2 pp2 M8
  // shard_optimizer", "1f1b dp2 pp2 M8 pp-dp-tp" (ranks in pipeline-major order): for
  // tables and logs.
  std::string label() const;
};

struct Plan {
  std::vector<PlanCandidate> best;  // fastest first, at most PlanRequest::keep
  // What ppstage train runs when nothing is chosen: 1F1B over all ranks as pipeline
  // ranks, one stage each, twice the stages in micro-batches, balanced by FLOPs
  // (defaultCut); absent (microbatches 0) where that cannot run.
  PlanCandidate default_config;
  int64_t candidates = 0;   // layouts, schedules and micro-batch counts considered
  int64_t simulated = 0;    // of those, simulated
  int64_t refused = 0;      // a schedule refused them
  int64_t over_budget = 0;  // over the memory budget
};

// Throws ppstage::Error (a user error, one line) when no layout of `request.ranks` can run
// the profile's model (no dp divides the batch with pp no more than the units), when the
// schedules refuse every candidate (naming the first refusal), or when nothing fits the
// memory budget (naming the smallest peak any candidate predicts).
Plan planPipeline(const CostProfile& profile, const PlanRequest& request,
                  const ScheduleRegistry& registry);

// `candidate`'s layout (schedule, dp, pipeline ranks, stages per rank, placement and
// micro-batches) cut as the planner cuts each candidate (Note [Planning a pipeline]): its
// units' F + B balanced at its micro-batch size, then, at 2 to 16 stages, each boundary
// moved while the simulated step falls and the peak fits `budget_bytes` (0: no budget);
// nothing recomputed. Returns the candidate with that cut and its prediction. What
// --pipeline.balance time cuts by. Throws ppstage::Error when its schedule refuses it.
PlanCandidate cutFor(const CostProfile& profile, PlanCandidate candidate,
                     const ScheduleRegistry& registry, double budget_bytes = 0);

// The cut --pipeline.balance params makes of `stages` stages: the units' parameter bytes
// balanced (the stage_starts of a candidate).
std::vector<size_t> paramsCut(const CostProfile& profile, int stages);

// The cut the default --pipeline.balance (flops) makes: the units' FLOPs balanced, or
// their parameter bytes where the profile has no FLOPs (defaultBalanceOf says which).
std::vector<size_t> defaultCut(const CostProfile& profile, int stages);
const char* defaultBalanceOf(const CostProfile& profile);

// `candidate`'s prediction with the cut it holds (stage_starts; empty: balanced as the
// planner balances) and what it recomputes (PlannedRecompute::units). Throws ppstage::Error
// when its schedule refuses it.
PlanCandidate predictCandidate(const CostProfile& profile, PlanCandidate candidate,
                               const ScheduleRegistry& registry);

}  // namespace ppstage
