// plan: what the planner plans with. A CostProfile is what one measurement of a model
// found (measure/unit_costs.h measures it; `ppstage plan --plan.save_costs` writes it as
// JSON and `--plan.costs` reads it back, so a plan needs no model and no measuring): each
// splittable unit's F, B, I and W seconds and the bytes one micro-batch keeps alive in it,
// at two micro-batch sizes, its parameter bytes, and what a step costs after its actions.
//
// Note [Costs per micro-batch size]
// A micro-batch's cost is not the batch's cost divided by the micro-batches: each action
// has a fixed part (launching ops, small matrices that use the cores badly, Python-free
// but not free bookkeeping) and a part that grows with its samples. Measured at two sizes
// b0 < b1, a unit's cost at size b is the line through both points, a + c b: between them
// it interpolates, outside it extrapolates the fixed part the two points show, and never
// goes below zero. The planner asks for every candidate's micro-batch size this way.
//
// Note [Recomputation in the profile]
// A unit that holds blocks (findBlocks', the ones --train.recompute reruns) is measured
// three times: as it is, with every block of it recomputed in full, and selectively
// (compile/recompute.h). Each measurement runs as the first (Note [Measuring units as a
// stage runs them]): its F keeps only what recomputation keeps, its B and I rerun the
// block, and its backward peak holds the rerun's activations. The planner takes a unit's
// figures under the policy a candidate gives it (Note [Recomputation in the plan]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/schedule/per_kind.h"

namespace ppstage {

// A unit's figures measured with its blocks recomputed under one policy (Note
// [Recomputation in the profile]), as UnitCost's: one entry per micro-batch size, all
// empty where not measured.
struct RecomputedUnitCost {
  std::vector<PerCompute<double>> seconds;
  std::vector<double> activation_bytes;
  std::vector<double> backward_peak_bytes;
  std::vector<double> weight_pending_bytes;

  bool measured() const { return !seconds.empty(); }
};

// One splittable unit (split/units.h), in unit order. Each vector has one entry per
// CostProfile::microbatch_sizes.
struct UnitCost {
  std::string path;                // module path of the unit ("layers.3"); a split point
  int64_t param_bytes = 0;         // its parameters' storage, as a stage holding it keeps it
  int64_t trainable_elements = 0;  // elements of those that train: gradients, optimizer state
  // Its forward FLOPs on the captured example input (split/flops.h): what the default
  // balance evens out. 0 where not counted (profiles written before it was recorded).
  double flops = 0;
  std::vector<PerCompute<double>> seconds;  // F, B, I, W of one micro-batch
  // Tensor bytes one micro-batch keeps alive between its F and its backward (what autograd
  // saved, and the unit's outputs), and the bytes of its outputs alone (what a cut after
  // it sends).
  std::vector<double> activation_bytes;
  std::vector<double> output_bytes;
  // The most its backward holds at once above what it started with (gradients on their
  // way, an op's workspace): what a rank needs on top of its in-flight activations.
  std::vector<double> backward_peak_bytes;
  // Tensor bytes one micro-batch keeps between its I and its W (zero-bubble schedules):
  // the saved inputs of the weight ops and the gradients arriving at them
  // (compile/split_backward.h); more than activation_bytes where those gradients are wide
  // (an MLP's hidden layer). Profiles written before it was measured read it as
  // activation_bytes.
  std::vector<double> weight_pending_bytes;
  // The module paths of the blocks it holds, in execution order (what a count of
  // --train.recompute_blocks counts), and its figures with them recomputed.
  std::vector<std::string> blocks;
  RecomputedUnitCost full;
  RecomputedUnitCost selective;

  // Its figures under `policy`: `full` or `selective`, or null for none and where that
  // policy was not measured (a unit without blocks).
  const RecomputedUnitCost* recomputed(RecomputePolicy policy) const;
};

struct CostProfile {
  int version = 1;
  std::string model;         // what was measured (--model.name)
  std::string compile_mode;  // the compile mode it was measured in
  std::string precision;     // fp32 | bf16
  int64_t batch_size = 0;    // the global batch a step takes (the candidates cut it)
  // The tensor-parallel ranks each unit was measured sharded over (--train.tp): its seconds
  // and bytes are one rank's share, its group's all-reduces included, and a plan lays out
  // groups of this many ranks. Profiles written before it was recorded read it as 1.
  int tp = 1;
  // Tokens in one sample (the input's elements for token inputs, 1 otherwise): tokens/s.
  int64_t tokens_per_sample = 1;
  std::vector<int64_t> microbatch_sizes;  // ascending; see Note [Costs per micro-batch size]
  std::vector<UnitCost> units;
  // The tail after a step's actions (Note [Predicted step] in src/train/run_summary.cpp):
  // the optimizer step, clipping's norm and dropping the gradients, per trainable element.
  double optimizer_s_per_element = 0;
  // Bytes kept per trainable element beside the parameter: its gradient (fp32), the
  // optimizer's state (AdamW's two moments, SGD's momentum) and, in bf16, the fp32 master.
  double state_bytes_per_element = 0;
  // Of those, the optimizer's state alone (AdamW 8, SGD with momentum 4, else 0): what a
  // sharded optimizer divides over the replicas, with an fp32 master of every element
  // (Note [Sharded optimizer state]). Profiles written before it read it from the above.
  double optimizer_state_bytes_per_element = 0;
  // Messages between ranks: seconds = latency + bytes / bandwidth; and a sum over n ranks
  // (gradients of data parallelism), which goes around a ring in 2 (n - 1) steps, each
  // paying a message's latency: (n - 1) x latency + 2 (n - 1) / n x bytes / bandwidth, the
  // latency that of 2 ranks (comm/link_probe.cpp divides a larger group's by n - 1).
  // `links`: "measured over N ranks", or what they were assumed from ([plan]'s options).
  double link_latency_s = 0;
  double link_bytes_per_s = 0;
  double allreduce_latency_s = 0;
  double allreduce_bytes_per_s = 0;
  std::string links;
  // The same two lines between hosts, where the job that measured ran on several (Note
  // [Probing the links of a job], comm/link_probe.h; the four above are then inside a
  // host); 0 where it did not, and a plan charges traffic between hosts as the above.
  double host_link_latency_s = 0;
  double host_link_bytes_per_s = 0;
  double host_allreduce_latency_s = 0;
  double host_allreduce_bytes_per_s = 0;
  // The job's all-reduce of a step's losses and norms over its step_reduce_ranks ranks, as
  // the probe measured it (LinkCosts::step_reduce_s); 0 where not measured.
  double step_reduce_s = 0;
  int step_reduce_ranks = 0;
  // Every pair of ranks the probe measured, with their hosts (names where known).
  struct ProbedLink {
    int first_rank = 0, second_rank = 0;
    std::string first_host, second_host;
    double latency_s = 0;
    double bytes_per_s = 0;
  };
  std::vector<ProbedLink> probed_links;
  // Tensors several units hold (an embedding tied to the LM head): the units, in order,
  // and the bytes of its gradient (fp32, as summed). Where a cut puts them on different
  // pipeline ranks, the step sums the copies' gradients across those ranks
  // (train/gradient_sync.h). Empty in profiles written before it was recorded.
  struct Tie {
    std::vector<size_t> units;
    int64_t gradient_bytes = 0;
  };
  std::vector<Tie> ties;
  // The share of a core each compute thread had while the units were measured (CPU ranks
  // that outnumber the cores share them: core/cpu_layout.h), which the simulator needs
  // to run ranks at other shares (Note [Ranks that share cores]); 0 where not known (a
  // GPU, profiles written before it), and a plan then takes the seconds as they are.
  double core_share = 0;

  // Unit `u`'s cost of `kind` for one micro-batch of `size` samples (Note [Costs per
  // micro-batch size]), with its blocks recomputed under `policy` where measured so.
  double secondsOf(size_t u, ActionKind kind, double size,
                   RecomputePolicy policy = RecomputePolicy::kNone) const;
  double activationBytesOf(size_t u, double size,
                           RecomputePolicy policy = RecomputePolicy::kNone) const;
  double outputBytesOf(size_t u, double size) const;
  double backwardPeakBytesOf(size_t u, double size,
                             RecomputePolicy policy = RecomputePolicy::kNone) const;
  double weightPendingBytesOf(size_t u, double size,
                              RecomputePolicy policy = RecomputePolicy::kNone) const;
  // The policies some unit was measured under besides none, full first.
  std::vector<RecomputePolicy> recomputePolicies() const;
  // Bytes a rank keeps per trainable element beside the parameter at `dp` replicas, with
  // the optimizer sharded over them or not: sharded, the whole fp32 gradient, and 1/dp of
  // the optimizer's state and of an fp32 master (kept in fp32 too).
  double stateBytesPerElement(int dp, bool shard_optimizer) const;
  // The optimizer's seconds for `elements` trainable elements: 1/dp of them sharded.
  double optimizerSeconds(double elements, int dp, bool shard_optimizer) const;
  // Whether the links between hosts were measured (otherwise they are the ones inside).
  bool hasHostLinks() const { return host_link_bytes_per_s > 0 && host_allreduce_bytes_per_s > 0; }
  // A message of `bytes` between two ranks, on two hosts where `across_hosts`.
  double messageSeconds(double bytes, bool across_hosts = false) const;
  // An all-reduce of `bytes` over `ranks` ranks (0 for one rank), some of them on other
  // hosts where `across_hosts`.
  double allReduceSeconds(double bytes, int ranks, bool across_hosts = false) const;
};

// The line through (sizes[0], values[0]) and (sizes[1], values[1]) at `size`, at least 0;
// values[0] scaled by size where only one size was measured.
double costAtSize(const std::vector<int64_t>& sizes, const std::vector<double>& values,
                  double size);

// The mean of `profiles` (the same model measured on every rank of a job, at once or in
// turns: measureCostProfileOnRanks): seconds and bytes averaged unit by unit; the rest is
// the first's. Throws ppstage::Error for profiles of different units.
CostProfile averageProfiles(const std::vector<CostProfile>& profiles);

// JSON text of `profile`, and back. readCostProfile throws ppstage::Error naming `source`
// for text that is not a cost profile (a missing field, units without costs at every size).
std::string costProfileToJson(const CostProfile& profile);
CostProfile readCostProfile(const std::string& text, const std::string& source);

}  // namespace ppstage
