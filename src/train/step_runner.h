// The second phase of `ppstage train`: one optimizer step at a time, on every rank.
//
// A step: this replica's slice of the global batch cut into micro-batches, the executor
// runs the rank's actions (runtime/executor.h), GradientSync sums data-parallel and tied
// gradients, one world all-reduce (StepReduce) gives the loss, the global gradient norm,
// the per-kind action costs, every rank's busy time, stop requests (stop_signal.h) and where
// a NaN or inf appeared, the gradients are clipped and the optimizer steps: unless the
// loss or the gradient norm is not finite, in which case the step applies nothing.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/comm/transfer_probe.h"
#include "ppstage/train/sharded_optimizer.h"
#include "ppstage/train/trainer.h"
#include "step_reduce.h"

namespace torch::optim {
class Optimizer;
}

namespace ppstage {

class Communicator;
class Executor;
class GradientSync;
class SampleOrder;
class TraceRecorder;
struct ClockAlignment;
class MasterWeights;
struct Padding;
struct StepData;
struct StepStats;
class Dataset;
struct Config;
struct JobLayout;
struct LocalStage;
struct RankModel;

// What one step did, over the whole job.
struct StepResult {
  double loss = 0;       // the mean loss of the step's global batch
  double accuracy = 0;   // classification: the share of its labels predicted right; else NaN
  double lr = 0;         // the learning rate the optimizer applied (train/lr_schedule.h)
  double grad_norm = 0;  // the global gradient norm before clipping
  double seconds = 0;    // wall time of the step on this rank
  double bubble = 0;     // idle over (ranks x step time)
  double rss_mb = 0;     // this rank's resident memory after the step
  double tensor_mb = 0;  // and its tensor bytes (the counting allocator's; 0 without it)
  StepReduce reduced;    // the all-reduced numbers (costs, busy time, compile counts)
  // False when the loss or the gradient norm was NaN or inf: the optimizer did not step,
  // and `nonfinite` says where it first appeared ("the loss of micro-batch 3 (stage 1) is
  // nan", "the gradient of layers.0.mlp.fc.weight (stage 0) is not finite").
  bool finite = true;
  std::string nonfinite;
  int stop_signal = 0;  // a signal some rank received before the step's all-reduce; 0: none
  // Some rank abandoned the step to stop (Note [Abandoning a step]): no rank applied it,
  // and the parameters, optimizer state and data position are the previous step's. Only
  // `reduced` and `stop_signal` are filled in then.
  bool abandoned = false;
  // This rank's own: the mean seconds of its F, B, I and W actions (NaN for a kind it did
  // not run), and the step's tail after its actions (gradient sync, all-reduce, optimizer).
  PerCompute<double> action_s;
  double tail_s = 0;
  // The data set's passes done through this step: samples consumed over its samples; NaN
  // for endless data (synthetic).
  double epoch = 0;
  // The same mean seconds per stage of this rank (in increasing stage order).
  std::vector<PerCompute<double>> stage_action_s;
  // Per stage of this rank: the most bytes one micro-batch kept (StepStats::stage_kept_bytes).
  std::vector<double> stage_kept_bytes;
  // Seconds this rank waited for transfers, per kind.
  PerTransfer<double> wait_s;
  int64_t receive_buffers_allocated = 0;  // by this rank's executor so far
  // Tensor parallelism: this rank's seconds in its group's all-reduces during the step,
  // and how many it ran.
  double tp_s = 0;
  int64_t tp_all_reduces = 0;
  // The tokens of the step's global batch: its documents' own (`tokens`) and with their
  // padding (`padded_tokens`); both JobLayout::tokens_per_step for data of one shape.
  int64_t tokens = 0;
  int64_t padded_tokens = 0;
  // Where micro-batches differ in length: this replica's, per micro-batch (StepData).
  std::vector<int64_t> microbatch_lengths;
};

class StepRunner {
 public:
  // Collective over `comms`: exchanges boundary descriptions with remote neighbours (on
  // control), makes the gradient sync groups, the optimizer and the executor, which owns
  // `stages` (this rank's compiled stages, JobSetup::takeLocalStages) and posts on data
  // (train/pipeline_messages.h). `layout`, `model`, `data` (null where this rank reads no
  // samples) and the communicators `comms` names must outlive the runner.
  StepRunner(const Config& config, const JobLayout& layout, const RankModel& model,
             const Dataset* data, std::vector<LocalStage> stages, const JobCommunicators& comms);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Step `step` (0-based), on the next global batch of the sample order. Collective;
  // throws CommError when a peer does not answer.
  StepResult run(int64_t step);

  // The data order position: samples consumed so far (every step, applied or not, takes
  // one global batch). Set it when resuming.
  int64_t samplesSeen() const { return samples_seen_; }
  void setSamplesSeen(int64_t samples) { samples_seen_ = samples; }

  // What the optimizer steps for stage parameter `parameter`: its fp32 master weight with
  // --train.precision bf16, else itself (what checkpoints load into). With a sharded
  // optimizer (--train.shard_optimizer), the whole fp32 value prepareSave gathered, or one
  // to load into that mastersLoaded then shards.
  at::Tensor masterOf(const at::Tensor& parameter) const;
  // The optimizer's whole state of stage parameter `parameter`, named as optimizerState
  // names it (runtime/optimizer.h); sharded, as prepareSave gathered it.
  std::map<std::string, at::Tensor> optimizerStateOf(const at::Tensor& parameter) const;
  // Sets `parameter`'s optimizer state to `state` (whole, as a checkpoint holds it under
  // `path`); sharded, it waits for mastersLoaded.
  void loadOptimizerState(const at::Tensor& parameter,
                          const std::map<std::string, at::Tensor>& state, const std::string& path);
  // Before a save reads masterOf and optimizerStateOf: collective over the data-parallel
  // group, where the optimizer is sharded (it gathers every whole master and state; valid
  // until the next step); nothing otherwise.
  void prepareSave();
  // Bytes this rank keeps for the optimizer: its state (AdamW's moments, SGD's momentum),
  // and its fp32 masters where it has them apart from the parameters (bf16, or sharded);
  // sharded, its share of each.
  int64_t optimizerStateBytes() const;
  int64_t masterBytes() const;
  // What checkpoints and --output.params_dir store for a stage tensor: masterOf, a bf16
  // one (a buffer) widened to fp32 (model_identity.h's storedDtype).
  at::Tensor storedValueOf(const at::Tensor& tensor) const;
  // After a checkpoint's values were loaded into the masters: rounds them into the stages'
  // bf16 parameters (nothing in fp32); sharded, each rank takes its share of the masters
  // and states loaded.
  void mastersLoaded();

  // Collective: writes what the steps so far recorded to --output.trace (rank 0 writes
  // the file); returns the number of events this rank recorded. Only with a trace.
  int64_t writeTrace();
  bool tracing() const { return trace_ != nullptr; }

  // Collective over the pipeline neighbours: the one-way time of this rank's boundaries'
  // messages (measureTransfers), for the prediction. Call between steps.
  TransferSeconds measureTransfers();

 private:
  // Tensor bytes when the step began, and their peak through its backwards.
  struct TensorPeak {
    int64_t at_start = 0;
    int64_t peak = 0;
  };
  // This rank's part of the step's one world all-reduce, summed over all ranks (packed).
  // `targets_in_step`: what the step's loss was divided by (StepData).
  at::Tensor allReduceStep(const StepStats& stats, const TensorPeak& memory,
                           int64_t targets_in_step, bool abandoning);
  // The step's actions and gradient sync into `stats`; true where they were abandoned to
  // stop (Note [Abandoning a step]: only with --checkpoint.dir, where a stop saves). Keeps
  // a copy of the buffers (BatchNorm's statistics) as the step found them.
  // `actions_ended` is called between the actions and the sync (the step's tail starts).
  bool runActions(int64_t step, const StepData& data, StepStats& stats,
                  const std::function<void()>& actions_ended);
  // Before a step's actions: bf16 gradients accumulate in fp32 zeros (MasterWeights, or
  // here where the optimizer is sharded).
  void startGradients();
  // The gradient sync after a step's actions: ties and the replicas' sum (a sharded
  // optimizer's reduce-scatter where it is sharded).
  void synchronizeGradients();
  // The result of a step some rank abandoned: nothing applied, the buffers and the data
  // position (`samples_before`) put back, the gradients dropped.
  StepResult abandoned(int64_t samples_before, StepReduce reduced);
  // This rank's share of the next global batch of the sample order (inputs on stage 0's
  // rank, targets on the last stage's), which it then counts as consumed.
  StepData nextStepData();
  // A finite step's optimizer step, clipped, at result.lr; else its gradients dropped and
  // where they went non-finite noted (result.nonfinite).
  void applyGradients(StepResult& result);
  // `data` with this replica's targets of the step's samples `indices` (this replica's
  // begin at `replica_begin`), one micro-batch at a time (documents padded with
  // --train.ignore_index), and the count of the whole step's.
  StepData withTargets(StepData data, const std::vector<int64_t>& indices,
                       int64_t replica_begin) const;
  // How documents are padded: the target field with --train.ignore_index.
  Padding paddingOf() const;

  const Config& config_;
  const JobLayout& layout_;
  const RankModel& model_;
  const Dataset* data_;
  Communicator& world_;                     // JobCommunicators::control
  Communicator& collectives_;               // JobCommunicators::collectives()
  std::unique_ptr<Communicator> channels_;  // the executor's, where data needs them
  std::unique_ptr<GradientSync> sync_;
  std::vector<at::Tensor> params_;
  // Whether a stop saves (--checkpoint.dir), so that a step may be abandoned, and the
  // buffers of this rank's stages, put back when one is.
  bool saves_on_stop_ = false;
  std::vector<at::Tensor> buffers_;
  std::vector<at::Tensor> buffers_at_start_;  // their copies as the step in flight found them
  std::unique_ptr<MasterWeights> masters_;    // bf16 only: the fp32 weights the optimizer steps
  std::unique_ptr<torch::optim::Optimizer> optimizer_;  // null where the optimizer is sharded
  std::unique_ptr<ShardedOptimizer> sharded_;           // --train.shard_optimizer at dp > 1
  // Sharded: whole masters and states, gathered for a save or loaded from a checkpoint.
  mutable std::unique_ptr<ShardedOptimizer::WholeState> whole_;
  // Where `parameter` is in params_; params_.size() where it is none of them.
  size_t indexOf(const at::Tensor& parameter) const;
  std::unique_ptr<TraceRecorder> trace_;  // null: --output.trace is not set
  std::unique_ptr<ClockAlignment> clock_;
  std::unique_ptr<Executor> executor_;  // records into *trace_
  std::unique_ptr<SampleOrder> order_;
  std::vector<BoundaryLink> links_;  // the boundaries to other ranks this rank's stages have
  int64_t samples_seen_ = 0;
  int64_t data_samples_ = 0;  // what the sample order draws from; 0: endless (synthetic)
};

}  // namespace ppstage
