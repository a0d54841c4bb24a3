// The last phase of `ppstage train`: the run's metrics and its closing lines.
//
// RunRecord collects what every step measured (StepResult); summarizeRun() adds what each
// rank measured of itself (RankMetrics: memory, compile counts; one all-reduce), writes the
// parameter files, asks the simulator what the schedule should have taken with the
// measured action costs of every stage (Note [Predicted step]), and on rank 0 prints the
// summary and writes the metrics JSON.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "ppstage/observe/metrics.h"
#include "step_runner.h"

namespace ppstage {

class Communicator;
struct Config;
class Dataset;
struct JobLayout;
struct RankModel;

struct RunRecord {
  std::vector<double> losses;
  std::vector<double> accuracies;      // NaN unless the run classifies
  std::vector<double> learning_rates;  // what the optimizer applied
  std::vector<EvalRecord> eval;        // every evaluation
  std::vector<double> step_time_s;
  std::vector<double> bubble_fraction;
  std::vector<int64_t> tokens, padded_tokens;  // StepResult's, every step
  // Where micro-batches differ in length: every step's, this replica's (StepResult's).
  std::vector<std::vector<int64_t>> microbatch_lengths;
  std::vector<double> rss_mb;     // this rank's, after every step
  std::vector<double> tensor_mb;  // the same for its tensor bytes
  int open_fds_start = -1;        // this rank's open file descriptors after the first step
  // Mean seconds of an F, B, I or W action in each step after the first (the first
  // includes warm-up: allocation, profiling runs); their medians resist the machine's spikes.
  PerCompute<std::vector<double>> action_s;
  // The same for this rank's own actions, and this rank's tail of every step after the
  // first (StepResult::tail_s).
  PerCompute<std::vector<double>> my_action_s;
  std::vector<double> my_tail_s;
  // The same per stage of this rank (increasing stage order) and kind.
  std::vector<PerCompute<std::vector<double>>> my_stage_action_s;
  // Per stage of this rank: the most bytes one micro-batch's F kept, over the steps after
  // the first.
  std::vector<double> my_stage_kept_bytes;
  // This rank's seconds waiting for transfers in every step after the first, per kind.
  PerTransfer<std::vector<double>> my_wait_s;
  int64_t receive_buffers_allocated = 0;  // by this rank's executor, after the last step
  // This rank's tensor-parallel all-reduces in every step after the first: seconds, count.
  std::vector<double> my_tp_s, my_tp_all_reduces;
  // The one-way message time of this rank's boundaries (StepRunner::measureTransfers),
  // measured after the steps, before the summary.
  TransferSeconds transfers;
  std::vector<double> busy_s;  // compute seconds of every rank, over the run
  // Every rank's largest tensor-memory peaks of a step (StepReduce), MB.
  std::vector<double> peak_allocated_mb;
  std::vector<double> peak_activation_mb;
  double wall_s = 0;  // the steps' wall time
  // Checkpoints and how the run began and ended.
  std::string resumed_from;  // empty: a fresh start
  double resume_s = 0;       // finding, checking and loading the checkpoint
  int64_t first_step = 0;
  std::vector<CheckpointRecord> checkpoints;
  int64_t skipped_steps = 0;
  std::string stopped_by;  // "SIGTERM", "SIGINT" or empty

  // Adds step `step` of `steps`.
  void add(int64_t step, int64_t steps, const StepResult& result);
};

// Collective over `world`. Returns the run's metrics (the data's description only where the
// data set is open, rank 0 among them); rank 0 prints the closing lines to `log` and writes
// --output.metrics_json. Counts the compile cache's optimized graphs first.
// `data` is null where this rank reads no samples. --output.params_dir gets the values
// `runner` steps (bf16: the fp32 master weights).
RunMetrics summarizeRun(const Config& config, const JobLayout& layout, const RankModel& model,
                        const StepRunner& runner, const Dataset* data, const RunRecord& record,
                        Communicator& world, std::ostream& log);

}  // namespace ppstage
