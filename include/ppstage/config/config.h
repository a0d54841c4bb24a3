// Configuration of a ppstage run: one plain struct per INI section, with defaults.
//
// Every field is an option named `section.key`, both on the command line
// (`--model.layers 8`) and in an INI file given with `--config` (`[model]` / `layers = 8`);
// the command line overrides the file. Options are declared in src/config/options.cpp,
// validated across fields in src/config/validation.cpp, then read by the boxes through
// these structs. Options
// with a few named values are enums, parsed once when the options are read (Choices,
// core/choice.h): nothing downstream compares strings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppstage/core/choice.h"
#include "ppstage/core/placement.h"

namespace ppstage {

// --model.input_dtype: what a model file's example input holds.
enum class InputDtype { kInt64, kFloat32 };  // token ids | float samples

// --pipeline.balance: what automatic splitting makes equal across stages.
enum class Balance { kParams, kFlops, kTime };

// --compile.mode (see include/ppstage/compile/compiled_stage.h).
enum class CompileMode { kNone, kStage, kBlock };

// --train.optimizer.
enum class OptimizerKind { kAdamW, kSgd };

// --train.nonfinite: what a step whose loss or gradient norm is NaN or inf does.
enum class NonfinitePolicy {
  kStop,  // the run ends at that step, before the optimizer applies it (exit code 3)
  kSkip,  // the step's update is dropped and the run goes on (up to --train.max_skipped)
};

// --train.loss: the loss the last stage computes for each micro-batch (runtime/loss.h).
enum class LossKind {
  kCrossEntropy,  // logits (..., V) against integer targets (...), mean over targets
  kMse,           // mean squared error against targets of the output's shape
  kModel,         // the model's first output is the loss; the labels are one of its inputs
};

// --train.precision: what the stages compute in. bf16: forward, backward and the messages
// between stages in bfloat16, master weights and optimizer state in fp32
// (train/master_weights.h).
enum class Precision { kFp32, kBf16 };

// --train.recompute: what a recomputed block keeps of its forward for its backward; the rest
// runs again in its backward (compile/recompute.h).
enum class RecomputePolicy {
  kNone,       // every block keeps what its backward needs
  kFull,       // a block keeps only its inputs
  kSelective,  // also its matrix products', convolutions' and attention kernels' outputs
};

// --data.format: how --data.path is read (data/data_files.h).
enum class DataFormat { kAuto, kText, kTokens, kNpy, kTensors, kIdx };

// --data.token_dtype: the integer type of a flat token file.
enum class TokenDtype { kUint16, kUint32 };

// --data.seq_len_policy: the length each micro-batch of documents is padded to
// (data/sequence_batches.h). fixed: --model.seq_len; bucket: the shortest --data.buckets
// length its longest document fits; variable: its longest document's.
enum class SeqLenPolicy { kFixed, kBucket, kVariable };

// --train.lr_schedule: the learning rate of each step (train/lr_schedule.h).
enum class LrSchedule { kConstant, kCosine, kLinear };

// --comm.backend: what carries the pipeline's activations and gradients
// (config/device.h). auto: NCCL for CUDA tensors, MPI for CPU ones.
enum class CommBackend { kAuto, kMpi, kNccl };

template <>
struct Choices<RecomputePolicy> {
  static constexpr const char* kOption = "train.recompute";
  static constexpr std::pair<RecomputePolicy, const char*> kNames[] = {
      {RecomputePolicy::kNone, "none"},
      {RecomputePolicy::kFull, "full"},
      {RecomputePolicy::kSelective, "selective"}};
};
template <>
struct Choices<DataFormat> {
  static constexpr const char* kOption = "data.format";
  static constexpr std::pair<DataFormat, const char*> kNames[] = {
      {DataFormat::kAuto, "auto"},       {DataFormat::kText, "text"},
      {DataFormat::kTokens, "tokens"},   {DataFormat::kNpy, "npy"},
      {DataFormat::kTensors, "tensors"}, {DataFormat::kIdx, "idx"}};
};
template <>
struct Choices<TokenDtype> {
  static constexpr const char* kOption = "data.token_dtype";
  static constexpr std::pair<TokenDtype, const char*> kNames[] = {{TokenDtype::kUint16, "uint16"},
                                                                  {TokenDtype::kUint32, "uint32"}};
};
template <>
struct Choices<SeqLenPolicy> {
  static constexpr const char* kOption = "data.seq_len_policy";
  static constexpr std::pair<SeqLenPolicy, const char*> kNames[] = {
      {SeqLenPolicy::kFixed, "fixed"},
      {SeqLenPolicy::kBucket, "bucket"},
      {SeqLenPolicy::kVariable, "variable"}};
};
template <>
struct Choices<Precision> {
  static constexpr const char* kOption = "train.precision";
  static constexpr std::pair<Precision, const char*> kNames[] = {{Precision::kFp32, "fp32"},
                                                                 {Precision::kBf16, "bf16"}};
};
template <>
struct Choices<CommBackend> {
  static constexpr const char* kOption = "comm.backend";
  static constexpr std::pair<CommBackend, const char*> kNames[] = {
      {CommBackend::kAuto, "auto"}, {CommBackend::kMpi, "mpi"}, {CommBackend::kNccl, "nccl"}};
};
template <>
struct Choices<LrSchedule> {
  static constexpr const char* kOption = "train.lr_schedule";
  static constexpr std::pair<LrSchedule, const char*> kNames[] = {
      {LrSchedule::kConstant, "constant"},
      {LrSchedule::kCosine, "cosine"},
      {LrSchedule::kLinear, "linear"}};
};
template <>
struct Choices<InputDtype> {
  static constexpr const char* kOption = "model.input_dtype";
  static constexpr std::pair<InputDtype, const char*> kNames[] = {
      {InputDtype::kInt64, "int64"}, {InputDtype::kFloat32, "float32"}};
};
template <>
struct Choices<Balance> {
  static constexpr const char* kOption = "pipeline.balance";
  static constexpr std::pair<Balance, const char*> kNames[] = {
      {Balance::kParams, "params"}, {Balance::kFlops, "flops"}, {Balance::kTime, "time"}};
};
template <>
struct Choices<CompileMode> {
  static constexpr const char* kOption = "compile.mode";
  static constexpr std::pair<CompileMode, const char*> kNames[] = {
      {CompileMode::kNone, "none"}, {CompileMode::kStage, "stage"}, {CompileMode::kBlock, "block"}};
};
template <>
struct Choices<OptimizerKind> {
  static constexpr const char* kOption = "train.optimizer";
  static constexpr std::pair<OptimizerKind, const char*> kNames[] = {
      {OptimizerKind::kAdamW, "adamw"}, {OptimizerKind::kSgd, "sgd"}};
};
template <>
struct Choices<NonfinitePolicy> {
  static constexpr const char* kOption = "train.nonfinite";
  static constexpr std::pair<NonfinitePolicy, const char*> kNames[] = {
      {NonfinitePolicy::kStop, "stop"}, {NonfinitePolicy::kSkip, "skip"}};
};
template <>
struct Choices<LossKind> {
  static constexpr const char* kOption = "train.loss";
  static constexpr std::pair<LossKind, const char*> kNames[] = {
      {LossKind::kCrossEntropy, "cross_entropy"},
      {LossKind::kMse, "mse"},
      {LossKind::kModel, "model"}};
};

// [model]: which model to build or load, and the example input that gives shapes.
// The built-in models' names (--model.name); any other name is a torch.jit.save file.
inline constexpr char kGptModel[] = "gpt";
inline constexpr char kMlpModel[] = "mlp";

struct ModelConfig {
  std::string name = kGptModel;  // kGptModel, kMlpModel, or a path to a torch.jit.save file
  int64_t layers = 4;            // decoder blocks (gpt) or residual MLP blocks (mlp)
  int64_t d_model = 64;
  int64_t heads = 4;         // gpt only; d_model must be divisible by it
  int64_t vocab_size = 256;  // gpt vocabulary; also the bound of default token inputs
  int64_t seq_len = 32;
  int64_t mlp_ratio = 4;       // hidden width of every MLP = mlp_ratio * d_model
  bool tie_embeddings = true;  // gpt: LM head shares the token embedding's weight
  // Built-in models: dropout probability after the embeddings, on the attention weights
  // and after the attention and MLP outputs (gpt); after each MLP (mlp). 0: no dropout.
  double dropout = 0;
  // Example input for a model file: dtype and shape with the batch dimension first (its
  // size is always train.batch_size). Empty shape means (train.batch_size, seq_len), token
  // ids below vocab_size.
  InputDtype input_dtype = InputDtype::kInt64;
  std::vector<int64_t> input_shape;
  // Data fields fed to forward's arguments, "ARG=FIELD" or "FIELD" (an argument of that
  // name), in any order; empty: every field but the target, matched to forward's arguments
  // by name (one field and one argument: whatever their names).
  std::vector<std::string> inputs;

  // Whether `name` is a built-in model rather than a file.
  bool builtin() const { return name == kGptModel || name == kMlpModel; }
};

// [pipeline]: how the model is cut into stages, and the schedule that drives them.
struct PipelineConfig {
  // Number of stages; 0 means one more than the number of split points.
  int64_t stages = 0;
  // Module paths at which a stage starts ("layers.4,layers.8"); empty means balance.
  std::vector<std::string> split_points;
  // FLOPs by default: compute, which a stage's time follows; parameters (an embedding's
  // are many and cost almost nothing) put an 83M Llama's 14 GFLOPs on stage 0 against 98
  // on each of the others. Where no unit's FLOPs are counted, by params.
  Balance balance = Balance::kFlops;
  std::string schedule = "1f1b";           // a registered schedule, or a .csv table
  int64_t microbatches = 0;                // 0: twice the number of stages
  int64_t stages_per_rank = 1;             // more than 1: interleaved (virtual) stages
  Placement placement = Placement::kLoop;  // which rank runs which stage
  // How world ranks map to replicas and pipeline ranks (core/placement.h): dp-pp-tp keeps a
  // pipeline's ranks adjacent, pp-dp-tp a stage's replicas.
  RankOrder rank_order = RankOrder::kReplicaMajor;
  std::string schedule_plugin;  // shared library registering more schedules
  // train: plan the layout, schedule, micro-batches and cut first (plan/planner.h, with
  // [plan]) and run the winner; the options above that it chooses are ignored.
  bool auto_plan = false;
};

// [train]: the training run.
struct TrainConfig {
  int64_t batch_size = 8;  // global batch (over all micro-batches and replicas)
  int64_t seed = 0;        // parameter initialisation, example inputs, sample order, random ops
  int64_t steps = 50;      // optimizer steps
  double lr = 3e-3;        // the peak learning rate (after warm-up)
  LrSchedule lr_schedule = LrSchedule::kConstant;
  int64_t warmup_steps = 0;  // linear from lr / warmup_steps at step 1 up to lr
  double min_lr = 0;         // cosine and linear decay end here at the last step
  double weight_decay = 0.01;
  double grad_clip = 1.0;  // global gradient-norm bound; 0 turns clipping off
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double momentum = 0;           // sgd only
  std::optional<LossKind> loss;  // empty: auto, from the data's targets (runtime/loss.h)
  int64_t ignore_index = -100;   // cross_entropy: targets equal to it do not count
  Precision precision = Precision::kFp32;
  int64_t dp = 1;  // data-parallel replicas; world = pp * dp * tp
  int64_t tp = 1;  // tensor-parallel ranks per stage (parallel/tensor_parallel.h)
  // With tp: regions whose module path matches (ECMAScript, whole path) must be sharded;
  // one left replicated ends the run naming it and why. Empty: none must.
  std::string tp_require;
  int64_t threads = 0;  // intra-op threads per rank; 0: cores / local ranks
  // Where a rank's tensors live (config/device.h): cpu, cuda (the GPU of the rank's local
  // rank on its host) or cuda:N.
  std::string device = "cpu";
  NonfinitePolicy nonfinite = NonfinitePolicy::kStop;
  int64_t max_skipped = 10;  // skip: the run stops after this many skipped steps in a row
  // Activation recomputation (compile/recompute.h): the policy, and which of the model's
  // blocks (the repeated modules --compile.mode block finds) it applies to: empty, all; a regex
  // over their module paths (whole path); "N" or "N0,N1,...", the first N (Ns) blocks of
  // each stage (of stage s); "every:N", the N-th, 2N-th, ... block of the model.
  RecomputePolicy recompute = RecomputePolicy::kNone;
  std::string recompute_blocks;
  // The optimizer's fp32 masters and state sharded over the data-parallel replicas
  // (train/sharded_optimizer.h): 1/dp of them per rank; nothing to shard at dp 1.
  bool shard_optimizer = false;
};

// [checkpoint]: saving the run's state, and resuming from it (src/checkpoint, docs/cli.md).
struct CheckpointConfig {
  std::string dir;      // D: checkpoints go to D/step-<8 digits>/; empty: none
  int64_t every = 0;    // save every K steps; 0: only at the end and when stopped by a signal
  int64_t keep = 2;     // the newest complete checkpoints kept
  bool resume = false;  // continue from the newest complete checkpoint in D
};

// [compile]: how each stage's graph runs (see include/ppstage/compile/compiled_stage.h).
struct CompileConfig {
  CompileMode mode = CompileMode::kNone;
  std::string block_pattern;  // block: regex over module paths; empty: repeated module types
  bool dynamic = false;       // shape-generic optimized graphs instead of one per shape
  int64_t max_respecializations = 8;  // warn (once per rank) past this many
};

// [data]: where training samples come from.
struct DataConfig {
  // "" : the public-domain text embedded in ppstage; "synthetic": random samples drawn
  // from the seed; anything else: a data file or folder read as `format` says.
  std::string path;
  DataFormat format = DataFormat::kAuto;         // auto: by extension and magic number
  TokenDtype token_dtype = TokenDtype::kUint16;  // tokens files without a header
  std::string targets;   // npy: the targets' file beside one --data.path x.npy
  std::string target;    // the field that is the target; empty: labels, label, targets, target
  std::string val_path;  // the validation set (--eval), read as `path` is; empty: none
  // Samples of different lengths (data/sequence_batches.h): `documents` cuts the text into
  // documents (paragraphs; a token file's runs between `eot` tokens) instead of windows of
  // seq_len; bucket and variable always do. `buckets`: ascending lengths up to
  // --model.seq_len (which is always the last); empty: a quarter, half and all of it.
  SeqLenPolicy seq_len_policy = SeqLenPolicy::kFixed;
  bool documents = false;
  std::vector<int64_t> buckets;
  int64_t eot = -1;  // a token file's end-of-text token; -1: none

  bool cutsDocuments() const { return documents || seq_len_policy != SeqLenPolicy::kFixed; }
};

// [eval]: held-out evaluation during training (train/evaluator.h).
struct EvalConfig {
  int64_t every = 0;     // evaluate after every N steps (and after the last); 0: never
  int64_t batches = 10;  // global batches of the validation set per evaluation (at most)
};

// [output]: what a training run reports.
struct OutputConfig {
  int64_t log_every = 1;      // print a step line every N steps (and the last); 0: never
  std::string metrics_json;   // write the run's metrics here at the end
  std::string metrics_jsonl;  // append one JSON line per step and evaluation as the run goes
  std::string tensorboard;    // write TensorBoard event files into this directory as it goes
  std::string params_dir;     // write each rank's final parameters here (compare-runs reads it)
  std::string trace;          // write every rank's actions here, one Chrome trace JSON, at the end
};

// [comm]: how ranks talk.
struct CommConfig {
  double timeout_s = 300;  // every blocking wait gives up after this long (a dead peer)
  // Post receives ahead of the compute that needs them, as far as the receive buffers allow
  // (schedule/early_receives.h); false: just before it, where the lowering puts them.
  bool receives_ahead = true;
  CommBackend backend = CommBackend::kAuto;
};

// [plan]: `ppstage plan`, and train's --pipeline.auto (plan/planner.h).
struct PlanConfig {
  int64_t ranks = 0;       // the ranks to plan for; 0: the job's (train), required (plan)
  double memory_mb = 0;    // each rank's budget of tensor memory; 0: none
  std::string costs;       // plan from this saved cost profile instead of measuring
  std::string save_costs;  // write the measured cost profile here
  std::vector<std::string> schedules;  // the schedules to try; empty: every registered one
  int64_t top = 10;                    // candidates printed
  // Hosts the ranks fill in turn (ranks / hosts adjacent ranks each); 0: the job's (one
  // outside mpirun) (planner.h, Note [Links in the plan]).
  int64_t hosts = 0;
  // What a plan assumes for communication when it is not run under mpirun (which measures
  // it, comm/link_probe.h): a message between ranks takes latency + bytes / bandwidth, an
  // all-reduce over n ranks 2 (n - 1) messages' latency and 2 (n - 1) / n of its bytes at
  // allreduce_gbps.
  double link_latency_us = 5;
  double link_gbps = 5;
  double allreduce_gbps = 2.5;
};

struct Config {
  ModelConfig model;
  PipelineConfig pipeline;
  TrainConfig train;
  CommConfig comm;
  CompileConfig compile;
  DataConfig data;
  EvalConfig eval;
  OutputConfig output;
  CheckpointConfig checkpoint;
  PlanConfig plan;
};

}  // namespace ppstage
