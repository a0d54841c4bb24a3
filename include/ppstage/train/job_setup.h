// The first phase of `ppstage train`: what every rank decides before the first collective.
//
// setUpJob() resolves the layout (Topology), the micro-batches and the schedule, splits the
// model, picks the loss, opens the data and compiles this rank's stages, all locally, then
// agrees with every other rank (runAgreed): a bad option, model or data file on any rank
// ends all of them with the same one-line error before any of them waits on another.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/config/config.h"
#include "ppstage/config/device.h"
#include "ppstage/core/batch_layout.h"
#include "ppstage/core/topology.h"
#include "ppstage/data/dataset.h"
#include "ppstage/data/sequence_batches.h"
#include "ppstage/parallel/tensor_parallel.h"
#include "ppstage/parallel/tp_group.h"
#include "ppstage/runtime/executor.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/split/model_split.h"
#include "ppstage/train/captured_run.h"

namespace ppstage {

class Communicator;

// What this rank decided about the job before its first step; fixed from then on.
struct JobLayout {
  explicit JobLayout(Topology layout_of_this_rank) : topology(std::move(layout_of_this_rank)) {}

  Topology topology;  // as this rank sees it
  RankDevice device;  // --train.device and --comm.backend, resolved on this rank's host
  BatchLayout batch;
  PipelineSchedule schedule;  // every pipeline rank's lowered actions
  LossKind loss = LossKind::kCrossEntropy;
  DataRoles roles;              // the data's fields the model takes and the loss compares to
  bool classifies = false;      // cross_entropy against one label per sample: report accuracy
  bool token_inputs = true;     // the model takes token ids: throughput in tokens/s
  int threads = 1;              // intra-op threads of this rank
  int64_t tokens_per_step = 0;  // samples x tokens per sample (samples, for float inputs)
  // What the stages compute in and send (--train.precision; kFloat when bf16 fell back).
  at::ScalarType compute_dtype = at::kFloat;
  // Per cut (stage s to s+1): the bytes of one micro-batch's activations crossing it (its
  // gradients' are the same for those that need one); the longest, where lengths vary.
  std::vector<int64_t> message_bytes;
  // Documents (--data.documents, --data.seq_len_policy): every sample's length and how
  // micro-batches are padded, on every rank; null where every sample has the data's shape.
  std::shared_ptr<const SequenceBatches> sequences;
};

// This rank's share of the model. Move-only: `mine` points into split.stages.
struct RankModel {
  ModelSplit split;                             // every stage; only this rank's keep parameters
  std::vector<StageModule*> mine;               // this rank's stages, in order
  std::unique_ptr<CompileCache> compile_cache;  // this rank's, shared by its stages
  // With --train.tp above 1: this rank's tensor-parallel group, which its stages' graphs
  // name (evaluation's model shares it), and what the pass did to each of its stages
  // (mine's order); its communicator is attached once every rank has planned.
  std::shared_ptr<TpGroup> tp_group;
  std::vector<TpStageReport> tp_reports;
};

// Evaluation's share of this rank (--eval.every): the model captured in eval mode and cut
// where training cuts it, its parameters the training ones (the same tensors, so it sees
// every update), compiled apart; and the validation set.
struct EvalModel {
  RankModel model;
  std::vector<LocalStage> stages;       // this rank's, for the Evaluator
  std::shared_ptr<const Dataset> data;  // where samples are read and on rank 0; else null
  // Documents: the validation set's lengths and padding, on every rank (JobLayout's).
  std::shared_ptr<const SequenceBatches> sequences;
  int64_t batches = 0;  // global batches per evaluation
};

// The setup of this rank: the layout, the model, the data, and this rank's compiled stages,
// which the executor takes once (takeLocalStages). Move-only: the local stages point into
// model().split.stages and their compiled graphs into *model().compile_cache.
class JobSetup {
 public:
  JobSetup(JobLayout layout, RankModel model, std::shared_ptr<const Dataset> data,
           std::vector<LocalStage> local_stages);
  JobSetup(JobSetup&&) = default;
  JobSetup& operator=(JobSetup&&) = default;

  const JobLayout& layout() const { return layout_; }
  const RankModel& model() const { return model_; }
  // Kept where samples are read (the first and the last stage's ranks) and on rank 0,
  // which describes it; null elsewhere (a data file is opened on every rank to capture the
  // model on its samples, then let go).
  const Dataset* data() const { return data_.get(); }

  // Lets go of the fp32 values bf16 master weights start from (ModelSplit::master_values),
  // once the step runner has copied them.
  void releaseMasterValues() { model_.split.master_values.clear(); }

  // The split's method as the log and the reports give it: "time" where its split points
  // are --pipeline.balance time's cut (train/auto_plan.h, cutByTime).
  void setSplitMethod(std::string method) { model_.split.partition.method = std::move(method); }

  // --train.tp above 1: gives this rank's tensor-parallel group its communicator, split
  // from `world` (setUpJob's; train splits it again from NCCL's where the data goes over
  // NCCL, JobCommunicators::collectives()). Collective; nothing with a tp of 1.
  void attachTensorParallel(Communicator& world);

  // This rank's compiled stages, in order, for its executor. Taken once: the setup keeps
  // none afterwards, and taking them again is our bug.
  std::vector<LocalStage> takeLocalStages();

  // Evaluation's model and data; null without --eval.every.
  EvalModel* eval() { return eval_.get(); }
  const EvalModel* eval() const { return eval_.get(); }
  void setEval(std::unique_ptr<EvalModel> eval) { eval_ = std::move(eval); }

 private:
  JobLayout layout_;
  RankModel model_;
  std::shared_ptr<const Dataset> data_;
  std::vector<LocalStage> local_stages_;
  bool stages_taken_ = false;
  std::unique_ptr<EvalModel> eval_;
};

// The agreed setup of this rank of `world` (collective; see above), which cuts `run`'s
// capture of the model. Sets this process's intra-op threads and TorchScript's shape
// strategy. Throws JobError on every rank when any rank's setup failed.
JobSetup setUpJob(const Config& config, CapturedRun run, Communicator& world);

// The job's layout over `world` ranks: pp = world / (dp x tp); stages from
// --pipeline.stages, else one more than the split points, else one per pipeline rank
// times --pipeline.stages_per_rank. Throws ppstage::Error for a layout the ranks cannot
// make (core/topology.h).
Topology jobTopology(const Config& config, int world);
// jobTopology with every rank's host where this is an MPI job of `world` ranks (MPI's
// shared-memory split, comm/mpi_session.h); on one host otherwise.
Topology jobTopologyOnHosts(const Config& config, int world);

// What train checks of `config` on `world` ranks before it makes or measures anything:
// the options as a whole (config/options.h validate), the layout, the batch cut into each
// replica's micro-batches, the schedule built for the pipeline ranks, and a checkpoint
// directory that holds another run's checkpoints without --checkpoint.resume. Throws
// ppstage::Error with train's own line. `ppstage plan --write-config` proves its config so.
void checkTrainable(const Config& config, int world);

// Throws ppstage::Error where `checkpoint.dir` already holds checkpoints and
// --checkpoint.resume is not set: a fresh run must not mix its checkpoints with another's.
void checkFreshCheckpoints(const CheckpointConfig& checkpoint);

// The intra-op threads of one of `world` ranks: --train.threads, or (0) the cores of this
// machine shared among the ranks on it (mpirun's local size, else `world`).
int computeThreads(const TrainConfig& train, int world);

}  // namespace ppstage
