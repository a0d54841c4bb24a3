// observe: what a training run reports — the metrics JSON (--output.metrics_json), read
// back by `ppstage compare-runs`, and the process measurements behind it.
#pragma once

#include <string>
#include <vector>

#include "ppstage/schedule/per_kind.h"

namespace ppstage {

// What one rank reports of the run. The job's view of it (rank, stages, busy and idle
// seconds, tensor-memory peaks) comes from the steps' all-reduces; the rest is what the
// rank measured of itself (forEachOwnFigure), gathered at the end of the run.
struct RankMetrics {
  int rank = 0;
  std::string host;  // its host name (core/host_name.h)
  std::vector<int> stages;
  double busy_s = 0;  // compute (F, B, I, W) over the whole run
  double idle_s = 0;  // the rest of the steps' wall time: waiting, communication, optimizer
  // Tensor memory (observe/tensor_memory.h), the largest of any step: the peak of allocated
  // tensor bytes through its forwards and backwards, and that peak above what was
  // allocated when the step began (activations and gradients). 0 without the counting
  // allocator.
  double peak_allocated_mb = 0;
  double peak_activation_mb = 0;

  double peak_rss_mb = 0;
  // Seconds this rank ran recomputed blocks' forwards again in their backwards, over the
  // whole run (compile/recompute.h); 0 without recomputation.
  double recompute_s = 0;
  // What this rank keeps for the optimizer at the run's end, in MB: its state (AdamW's
  // moments, SGD's momentum), and its fp32 masters where they are apart from the
  // parameters (bf16, or --train.shard_optimizer); sharded, its share of each.
  double optimizer_state_mb = 0;
  double master_weights_mb = 0;
  // Compilation on this rank (compile/compiled_stage.h, CompileStats).
  long long graphs_compiled = 0;
  long long cache_hits = 0;
  long long respecializations = 0;
  long long specializations_per_graph = 0;  // the most executors one graph got (CompileStats)
  long long fusion_groups = 0;
  long long differentiable_graphs = 0;
  // Resident memory sampled after every step: its largest value, and its growth per 100
  // steps after warm-up (growthPer100Steps).
  double max_step_rss_mb = 0;
  double rss_growth_mb_per_100_steps = 0;
  // Tensor bytes allocated after every step (the counting allocator's; 0 without it): the
  // growth per 100 steps after warm-up, as for resident memory.
  double tensor_growth_mb_per_100_steps = 0;
  // File descriptors open after the first step and after the last (-1: unknown): a run
  // that leaks them (a file per checkpoint, per trace) shows the difference.
  long long open_fds_start = -1;
  long long open_fds_end = -1;
  // This rank's mean F, B, I, W seconds (0 for a kind it does not run) and its tail after
  // its actions (gradient sync, all-reduce, optimizer): medians over the steps after the
  // first.
  PerCompute<double> action_s;
  double tail_s = 0;
  // Seconds this rank waited per step for its transfers to complete (medians over the
  // steps after the first), per kind of transfer. A RECV's wait is the peer's lateness as
  // much as the transfer: the time its F or B could not start.
  PerTransfer<double> wait_s;
  // Receive buffers its executor allocated over the run: its pools, allocated once (see
  // runtime/executor.h), plus any allocated afresh because a buffer was still in use.
  long long receive_buffers = 0;
  // The one-way message times this rank measured at its boundaries after the steps: their
  // sum and count (the job's comm_s is their mean over all ranks).
  double transfer_s = 0;
  long long transfers = 0;
  // Tensor parallelism: seconds this rank spent per step in its group's all-reduces, and
  // how many it ran per step (medians over the steps after the first); 0 with tp 1.
  double tp_s = 0;
  long long tp_all_reduces = 0;

  // Calls `field(name, value)` on every figure the rank measured of itself, in one order:
  // the metrics JSON's names, and the order the ranks gather them in (train/step_reduce.h).
  // A value is a double, a long long, or per kind (PerCompute, PerTransfer).
  template <typename Self, typename Field>
  static void forEachOwnFigure(Self& r, Field field) {
    field("peak_rss_mb", r.peak_rss_mb);
    field("recompute_s", r.recompute_s);
    field("optimizer_state_mb", r.optimizer_state_mb);
    field("master_weights_mb", r.master_weights_mb);
    field("graphs_compiled", r.graphs_compiled);
    field("cache_hits", r.cache_hits);
    field("respecializations", r.respecializations);
    field("specializations_per_graph", r.specializations_per_graph);
    field("fusion_groups", r.fusion_groups);
    field("differentiable_graphs", r.differentiable_graphs);
    field("max_step_rss_mb", r.max_step_rss_mb);
    field("rss_growth_mb_per_100_steps", r.rss_growth_mb_per_100_steps);
    field("tensor_growth_mb_per_100_steps", r.tensor_growth_mb_per_100_steps);
    field("open_fds_start", r.open_fds_start);
    field("open_fds_end", r.open_fds_end);
    field("action_costs_s", r.action_s);
    field("tail_s", r.tail_s);
    field("wait_s", r.wait_s);
    field("receive_buffers", r.receive_buffers);
    field("transfer_s", r.transfer_s);
    field("transfers", r.transfers);
    field("tp_s", r.tp_s);
    field("tp_all_reduces", r.tp_all_reduces);
  }
};

// Compilation over the whole job.
struct CompileMetrics {
  std::string mode;                 // --compile.mode: "none", "stage" or "block"
  long long graphs_compiled = 0;    // summed over ranks
  long long cache_hits = 0;         // summed over ranks
  long long respecializations = 0;  // summed over ranks
  // The most executors any one graph of any rank got: one per input shape with static
  // shapes (a bucket each), one with dynamic shapes.
  long long specializations_per_graph = 0;
  long long fusion_groups = 0;          // in the optimized graphs, summed over ranks
  long long differentiable_graphs = 0;  // autodiff subgraphs, summed over ranks
  double compile_time_s = 0;  // the first steps over as many steady steps (warmupOverhead)
};

// One checkpoint the run saved.
struct CheckpointRecord {
  std::string path;    // "D/step-00000040"
  double seconds = 0;  // the save's wall time: tensor files, the agreement, the manifest
};

// One evaluation on the validation set (--eval.every).
struct EvalRecord {
  long long step = 0;  // after this many training steps
  double loss = 0;
  double accuracy = 0;  // NaN (null in JSON) unless the run classifies
  double seconds = 0;
};

// Activation recomputation in one stage (--train.recompute): the policy, and the blocks it
// applies to ("none" and no blocks where none recompute); and what one micro-batch's F
// kept alive there (for its backward, and its outputs), with or without recomputation as
// the run had it: the most over the steps after the first, by the counting allocator.
struct StageRecompute {
  int stage = 0;
  std::string policy = "none";
  std::vector<std::string> blocks;
  double kept_mb_per_microbatch = 0;
};

struct RunMetrics {
  // What ran.
  std::string model;
  std::string schedule;
  std::string data;
  int stages = 1;
  int pp = 1;
  int dp = 1;
  int tp = 1;
  int microbatches = 1;
  long long batch_size = 0;
  // Tokens of a step's global batch: the mean over steps where they differ (documents:
  // their own tokens, padding left out; padded_tokens_per_step with it).
  long long tokens_per_step = 0;
  long long padded_tokens_per_step = 0;
  std::string precision = "fp32";  // what the stages computed in: "fp32" or "bf16"
  // Per cut (stage s to s+1): bytes of one micro-batch's activations crossing it.
  std::vector<long long> message_bytes;
  std::string params_dir;  // where the final parameters were written; empty: nowhere
  // Checkpoints.
  std::string resumed_from;  // the checkpoint the run continued from; empty: a fresh start
  double resume_s = 0;       // its wall time: find, verify, check and load it
  long long first_step = 0;  // the 0-based step the run started at (resumed: the saved one)
  std::vector<CheckpointRecord> checkpoints;
  long long skipped_steps = 0;  // --train.nonfinite skip: steps whose update was dropped
  std::string stopped_by;       // "SIGTERM" or "SIGINT" when a signal ended the run early
  // Per step of this run (a skipped step's loss is NaN, null in JSON).
  std::vector<double> losses;
  std::vector<double> accuracies;      // classification: labels predicted right; else null
  std::vector<double> learning_rates;  // the learning rate each step applied
  std::vector<EvalRecord> eval;        // every evaluation of this run, in step order
  std::vector<double> step_time_s;
  std::vector<double> bubble_fraction;  // measured: idle / (ranks * step time)
  std::vector<long long> step_tokens;   // the tokens each step trained on (as tokens_per_step)
  // Summary.
  double final_loss = 0;
  // Median over steps of each step's tokens over its time (samples/s when inputs are not
  // tokens): for documents, real tokens (padding left out).
  double tokens_per_s = 0;
  std::string throughput_unit = "tokens";  // "tokens" or "samples": what tokens_per_s counts
  double measured_step_s = 0;              // median over steps
  // The schedule simulator's makespan with the costs every stage measured (its ranks'
  // action_s), and the predicted step: that makespan plus the tail of the rank that ends
  // its actions last (Note [Predicted step] in src/train/run_summary.cpp).
  double predicted_makespan_s = 0;
  double predicted_step_s = 0;
  // The one-way time of a pipeline message the prediction counts (comm/transfer_probe.h:
  // the mean over the boundaries); 0 with one rank.
  double comm_s = 0;
  // Per kind over all ranks, the median over steps of the mean per action (steps after
  // the first, which includes the compile/profiling runs).
  PerCompute<double> action_s;
  // Per stage: its F, B, I, W seconds the prediction uses (the median over steps of the
  // mean per action, averaged over the stage's data-parallel ranks; 0 for a kind it does
  // not run).
  std::vector<PerCompute<double>> stage_action_s;
  std::vector<RankMetrics> ranks;
  CompileMetrics compile;
  std::vector<StageRecompute> recompute;  // per stage, in stage order
};

std::string metricsToJson(const RunMetrics& metrics);
// Reads what metricsToJson wrote (the fields compare-runs needs: losses, final_loss,
// params_dir, ...). Throws ppstage::Error naming `source` on malformed input.
RunMetrics metricsFromJson(const std::string& text, const std::string& source);

// Peak resident set size of this process, in MB: since the last resetPeakRss(), else
// since it started (VmHWM in /proc/self/status; getrusage where that is missing).
double peakRssMb();
// Starts the peak over from the resident size now (/proc/self/clear_refs, Linux 4.0 and
// later); false where the kernel does not allow it.
bool resetPeakRss();
// Resident set size now, in MB (/proc/self/statm); 0 where unavailable.
double currentRssMb();
// File descriptors this process has open now (/proc/self/fd); -1 where unavailable.
int openFileDescriptors();
// Steps that pay for compiling: a profiling executor profiles a graph on its first run,
// optimizes the forward (autodiff subgraphs) on the second and their backward graphs on
// the third. With several micro-batches, or blocks sharing an executor, all of it falls in
// the first step; with one call per step it spreads over three.
constexpr size_t kWarmupSteps = 3;

// The fewest steps after the warm-up that growth is measured over: a slope fitted to a few
// noisy steps, times 100, reads as a leak.
constexpr size_t kMinGrowthSteps = 20;
// How many of `steps` steps come after the warm-up (kWarmupSteps or the first 10% of the
// steps, whichever is more): what growth is measured over.
size_t growthSteps(size_t steps);
// Growth per 100 steps of `samples` (one per step) after the warm-up: the least-squares
// slope times 100; 0 for fewer than kMinGrowthSteps samples after the warm-up.
double growthPer100Steps(const std::vector<double>& samples);

// The steady step: the median of the steps after the first kWarmupSteps (with fewer
// steps, the warm-up shrinks to leave one steady step).
double steadyStepTime(const std::vector<double>& step_times);
// What the warm-up steps took over as many steady steps, at least 0: the one-off cost of
// profiling and optimizing graphs. 0 for fewer than 2 steps.
double warmupOverhead(const std::vector<double>& step_times);

}  // namespace ppstage
