// See include/ppstage/train/job_plan.h.
#include "ppstage/train/job_plan.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "ppstage/checkpoint/checkpoint_dir.h"
#include "ppstage/comm/agreement.h"
#include "ppstage/comm/boundary_spec.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/compute_threads.h"
#include "ppstage/core/file.h"
#include "ppstage/core/text.h"
#include "ppstage/data/data_files.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/train/time_balance.h"

namespace ppstage {
namespace {

// The job's layout: pp = world / (dp x tp); stages from --pipeline.stages, else one more than the
// split points, else one per pipeline rank times --pipeline.stages_per_rank.
Topology jobTopology(const PipelineConfig& p, const TrainConfig& t, int world) {
  const int stages = p.stages > 0              ? static_cast<int>(p.stages)
                     : !p.split_points.empty() ? static_cast<int>(p.split_points.size()) + 1
                                               : 0;
  return Topology::forJob(world, static_cast<int>(t.dp), stages,
                          static_cast<int>(p.stages_per_rank), p.placement, static_cast<int>(t.tp));
}

}  // namespace

static int autoThreads(int world) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = local != nullptr ? std::max(1, std::atoi(local)) : world;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / ranks_here);
}

// --train.threads, or (0) the cores of this machine shared among its ranks.
int computeThreads(const TrainConfig& train, int world) {
  return train.threads > 0 ? static_cast<int>(train.threads) : autoThreads(world);
}

namespace {

// One sample of the model's first output, from the plan's shapes: (B, ...) -> (...), or
// rows of logits (B*T, V) -> (T, V).
SampleShape outputSample(const BoundaryTensor& output, int64_t batch) {
  const TensorMeta& meta = output.meta;
  SampleShape sample{meta.dtype, {}, 0};
  if (meta.sizes.empty()) return sample;
  const bool batch_first =
      meta.sizes[0] == batch && !meta.per_sample.empty() && meta.per_sample[0] == 1;
  if (batch_first) {
    sample.shape.assign(meta.sizes.begin() + 1, meta.sizes.end());
  } else {
    const int64_t last = meta.sizes.back();
    sample.shape = {meta.numel() / std::max<int64_t>(1, batch * last), last};
  }
  return sample;
}

// What a model-shaped data set must give: the model's input samples and, for the loss,
// targets shaped like one sample of its first output.
DataRequest dataRequestOf(const ModelSplit& split, LossKind loss, const Config& config) {
  DataRequest request;
  request.input.dtype = split.model.input.dtype;
  request.input.shape.assign(split.model.input.shape.begin() + 1, split.model.input.shape.end());
  request.input.token_bound = split.model.input.token_bound;
  request.output = outputSample(split.stages.back().outputs.at(0), config.train.batch_size);
  request.loss = loss;
  request.seed = config.train.seed;
  request.builtin_model = isBuiltinModel(config.model.name);
  return request;
}

// The example inputs of a data file: its first samples of each field on offer (cycling when
// the data set is smaller than the batch asked for), bound to forward's arguments at capture.
InputSpec dataInputSpec(const std::shared_ptr<const Dataset>& data, const DataRoles& roles,
                        const DataConfig& config) {
  const SampleShape& sample = data->fields().at(roles.offered_fields.at(0)).sample;
  InputSpec spec;
  spec.dtype = sample.dtype;
  spec.shape = {1};
  spec.shape.insert(spec.shape.end(), sample.shape.begin(), sample.shape.end());
  spec.token_bound = sample.token_bound;
  for (size_t field : roles.offered_fields) spec.names.push_back(data->fields().at(field).name);
  spec.source = "the first samples of --data.path '" + config.path + "'";
  const std::vector<size_t> fields = roles.offered_fields;
  spec.samples = [data, fields](int64_t batch) {
    std::vector<int64_t> indices;
    for (int64_t i = 0; i < batch; ++i) indices.push_back(i % data->size());
    if (data->length(0) == 0) return stackFields(*data, fields, indices);
    std::vector<at::Tensor> padded;  // documents: at the longest a sample may be
    for (const size_t f : fields) {
      padded.push_back(padField(*data, f, indices, data->fields().at(f).sample.shape.at(0), 0));
    }
    return padded;
  };
  return spec;
}

// The sequence length the plan's shapes are for when micro-batches differ in length (the
// example input's dimension 1); 0 when they do not.
int64_t planLength(const Config& config, const ModelSplit& split) {
  if (config.data.seq_len_policy == SeqLenPolicy::kFixed) return 0;
  const at::Tensor& input = split.example_inputs.at(0);
  PPSTAGE_INTERNAL_ASSERT(input.dim() >= 2, "lengths vary, but the input is ",
                          shapeText(input.sizes().vec()), " (captureForSplit checks it)");
  return input.size(1);
}

// One dim of `meta`: with `plan_length` 0 (lengths do
// not vary) as a function of the batch, else of the batch and the sequence length.
DimSpec dimSpecOf(const TensorMeta& meta, size_t d, int64_t plan_batch, int64_t plan_length) {
  const int64_t per_sample = meta.per_sample[d];
  const int64_t fixed = meta.sizes[d] - per_sample * plan_batch;
  if (plan_length == 0) return {per_sample, fixed};
  const int64_t pst = meta.per_sample_token[d], pt = meta.per_token[d];
  return {per_sample - pst * plan_length, fixed - pt * plan_length, pt, pst};
}

// The BoundarySpec of a stage's inputs (`inputs` true) or outputs, from the plan's shapes at
// `plan_batch` (and with lengths that vary, `plan_length`; else 0): what its neighbours
// check and size receive buffers from. Throws ppstage::Error for a boundary tensor whose
// shape is not an affine function of the batch (it could not be cut into micro-batches)
// or, with lengths that vary, of the sequence length.
BoundarySpec boundarySpecOf(const StageModule& stage, bool inputs, int64_t plan_batch,
                            int64_t plan_length) {
  BoundarySpec spec;
  spec.stage = inputs ? stage.index : stage.index + 1;
  for (const BoundaryTensor& t : inputs ? stage.inputs : stage.outputs) {
    const TensorMeta& meta = t.meta;
    PPSTAGE_CHECK(meta.per_sample.size() == meta.sizes.size(), "the tensor '", t.name,
                  "' crossing into stage ", spec.stage, " has a shape that does not grow ",
                  "linearly with the batch, so it cannot be cut into micro-batches");
    PPSTAGE_CHECK(plan_length == 0 || meta.per_token.size() == meta.sizes.size(), "the tensor '",
                  t.name, "' crossing into stage ", spec.stage, " has a shape ",
                  shapeText(meta.sizes), " that does not follow the sequence length (a size ",
                  "that is its square?), so micro-batches cannot differ in length: move the ",
                  "split point, or use --data.seq_len_policy fixed");
    TensorSpec tensor;
    tensor.name = t.name;
    tensor.dtype = meta.dtype;
    tensor.requires_grad = meta.requires_grad;
    for (size_t d = 0; d < meta.sizes.size(); ++d) {
      tensor.dims.push_back(dimSpecOf(meta, d, plan_batch, plan_length));
    }
    spec.tensors.push_back(std::move(tensor));
  }
  return spec;
}

// This rank's stages behind their compiled graphs (in `model`'s compile cache, made here);
// other ranks' stages drop their parameter copies, and master_values (bf16) keeps this
// rank's.
std::vector<LocalStage> compileLocalStages(const Config& config, const Topology& topology,
                                           RankModel& model) {
  const CompileMode mode = config.compile.mode;
  setShapeStrategy(config.compile.dynamic);
  model.compile_cache = std::make_unique<CompileCache>(
      mode, topology.rank(), config.compile.max_respecializations, config.compile.dynamic);
  std::vector<bool> blocks;
  if (mode == CompileMode::kBlock) {
    blocks = findBlocks(model.split.graph, config.compile.block_pattern);
  }
  std::vector<LocalStage> stages;
  for (int s : topology.myStages()) {
    StageModule& module = model.split.stages[static_cast<size_t>(s)];
    LocalStage stage;
    stage.module = &module;
    for (const ModuleCall& call : model.split.graph.calls) stage.call_paths.push_back(call.path);
    stage.compiled = std::make_unique<CompiledStage>(
        module.graph, module.inputs.size(), *model.compile_cache, "stage " + std::to_string(s),
        mode == CompileMode::kBlock
            ? segmentStage(*module.graph, module.node_call, model.split.graph, blocks)
            : std::vector<GraphSegment>{});
    const int64_t length = planLength(config, model.split);
    stage.input_spec = boundarySpecOf(module, true, config.train.batch_size, length);
    if (s + 1 < topology.numStages()) {
      stage.output_spec = boundarySpecOf(module, false, config.train.batch_size, length);
    }
    stages.push_back(std::move(stage));
    model.mine.push_back(&module);
  }
  std::map<std::string, at::Tensor> my_masters;  // bf16: the fp32 values this rank steps
  for (StageModule& module : model.split.stages) {
    if (!topology.owns(module.index)) {
      for (StageParameter& p : module.parameters) p.value = at::Tensor();
      continue;
    }
    for (const StageParameter& p : module.parameters) {
      const std::string& path = model.split.graph.parameters.at(p.model_parameters.at(0)).path;
      const auto master = model.split.master_values.find(path);
      if (master != model.split.master_values.end()) my_masters.insert(*master);
    }
  }
  model.split.master_values = std::move(my_masters);
  return stages;
}

// --train.tp above 1: this rank's stages rewritten into its shards of them, in `group`
// (made here when null). Throws ppstage::Error when a region --train.tp_require names stays
// replicated.
void shardLocalStages(const Config& config, const Topology& topology, RankModel& model,
                      std::shared_ptr<TpGroup> group) {
  if (topology.tpSize() == 1) return;
  model.tp_group =
      group ? std::move(group) : std::make_shared<TpGroup>(topology.tpRank(), topology.tpSize());
  const std::string& require = config.train.tp_require;
  const std::regex required(require.empty() ? "." : require);
  for (int s : topology.myStages()) {
    StageModule& stage = model.split.stages.at(static_cast<size_t>(s));
    model.tp_reports.push_back(shardStage(stage, model.split.graph, *model.tp_group));
    for (const StageParameter& p : stage.parameters) {  // bf16: the fp32 masters too
      const auto master = model.split.master_values.find(
          model.split.graph.parameters.at(p.model_parameters.at(0)).path);
      if (p.shard.sharded() && master != model.split.master_values.end()) {
        master->second = shardOf(master->second, p.shard);
      }
    }
    for (const TpRegion& region : model.tp_reports.back().regions) {
      PPSTAGE_CHECK(region.sharded || require.empty() || !std::regex_match(region.module, required),
                    "--train.tp ", topology.tpSize(), ": region ", region.module, " of stage ", s,
                    " cannot be sharded (", region.why, ") and --train.tp_require '",
                    config.train.tp_require, "' asks for it");
    }
  }
}

// Makes `eval`'s parameters the training stage's own tensors, by name. Throws
// ppstage::Error when the eval-mode stage uses one training's does not have, or holds
// another shard of it.
void shareParameters(const StageModule& train, StageModule& eval) {
  for (StageParameter& p : eval.parameters) {
    const auto same = std::find_if(train.parameters.begin(), train.parameters.end(),
                                   [&](const StageParameter& t) { return t.name == p.name; });
    PPSTAGE_CHECK(same != train.parameters.end(), "in eval mode, stage ", eval.index, " uses '",
                  p.name,
                  "', which the training stage does not: evaluation cannot share its "
                  "parameters");
    const bool same_shard = same->shard.dim == p.shard.dim && same->shard.parts == p.shard.parts;
    PPSTAGE_CHECK(same->value.sizes() == p.value.sizes() && same_shard, "in eval mode, stage ",
                  eval.index, " holds '", p.name, "' as ", shapeText(p.value.sizes().vec()),
                  ", training as ", shapeText(same->value.sizes().vec()),
                  " (tensor parallelism found other regions)");
    p.value = same->value;
  }
}

// Every path this rank will write, proven writable before anything else is done: a run
// must not lose its figures or parameters to a typo found after its last step.
void checkOutputPaths(const Config& config, const Topology& topology) {
  const bool leader = topology.rank() == 0;
  const bool writes_state = topology.dpRank() == 0;
  if (leader && !config.output.metrics_json.empty()) {
    checkWritableFile(config.output.metrics_json, "output.metrics_json");
  }
  if (leader && !config.output.trace.empty()) {
    checkWritableFile(config.output.trace, "output.trace");
  }
  if (writes_state && !config.output.params_dir.empty()) {
    checkWritableDirectory(config.output.params_dir, "output.params_dir");
  }
  const std::string& checkpoints = config.checkpoint.dir;
  if ((writes_state || leader) && !checkpoints.empty()) {
    checkWritableDirectory(checkpoints, "checkpoint.dir");
  }
  // A fresh run must not mix its checkpoints with another run's (pruning would keep the
  // other's newer ones and drop its own).
  if (leader && !checkpoints.empty() && !config.checkpoint.resume) {
    const std::string newest = newestStepDirectory(checkpoints);
    PPSTAGE_CHECK(newest.empty(), "--checkpoint.dir '", checkpoints,
                  "' already holds checkpoints (", newest,
                  "); continue from them with --checkpoint.resume true, or give an empty "
                  "directory");
  }
}

// The layout, the micro-batches and the schedule of this rank of `world`. On the way it
// proves this rank's output paths writable (checkOutputPaths) and sets this process's
// compute threads.
JobLayout layoutOf(const Config& config, int rank, int world) {
  JobLayout layout(jobTopology(config.pipeline, config.train, world).atRank(rank));
  const Topology& topology = layout.topology;
  checkOutputPaths(config, topology);
  layout.threads = computeThreads(config.train, world);
  setComputeThreads(layout.threads);
  const ScheduleOptions options =
      scheduleOptionsFor(config.pipeline, topology.numStages(), topology.stagesPerRank());
  layout.batch = batchLayout(config.train.batch_size, topology.dpSize(), options.microbatches);
  layout.schedule = buildSchedule(makeScheduleRegistry(config.pipeline.schedule_plugin), options);
  PPSTAGE_CHECK(static_cast<int>(layout.schedule.ranks.size()) == topology.ppSize(), "schedule '",
                layout.schedule.name, "' has ", layout.schedule.ranks.size(),
                " ranks; the job has ", topology.ppSize(), " pipeline ranks");
  return layout;
}

// Bytes of one micro-batch of `microbatch` samples crossing each cut of `split`: what the
// BoundarySpec of each stage's outputs (from the plan's shapes at `plan_batch`) sizes; with
// lengths that vary (`plan_length`, the longest), at the longest.
std::vector<int64_t> messageBytes(const ModelSplit& split, int64_t plan_batch, int64_t microbatch,
                                  int64_t plan_length) {
  std::vector<int64_t> bytes;
  for (size_t s = 0; s + 1 < split.stages.size(); ++s) {
    int64_t total = 0;
    for (const TensorSpec& t :
         boundarySpecOf(split.stages[s], false, plan_batch, plan_length).tensors) {
      int64_t numel = 1;
      for (int64_t size : t.sizes(microbatch, plan_length)) numel *= size;
      total += numel * static_cast<int64_t>(c10::elementSize(t.dtype));
    }
    bytes.push_back(total);
  }
  return bytes;
}

// Throws ppstage::Error when a bounded `data` holds fewer samples than one global batch.
void checkHoldsOneBatch(const Dataset& data, int64_t batch_size) {
  PPSTAGE_CHECK(data.size() == 0 || data.size() >= batch_size, data.describe(),
                " has fewer samples than one batch (--train.batch_size ", batch_size, ")");
}

// checkTargetsFit for `data`'s target field, over its values where the data set knows them.
void checkTargetsOf(const Dataset& data, const JobLayout& layout, const SampleShape& output,
                    int64_t ignore_index) {
  if (layout.loss == LossKind::kModel) return;  // the model compares them itself
  const size_t target = layout.roles.target;
  const auto range =
      layout.loss == LossKind::kCrossEntropy ? data.valueRange(target, ignore_index) : std::nullopt;
  checkTargetsFit(data.fields().at(target), output, layout.loss, ignore_index, range);
}

// The validation set, read as the training data is, whose fields match the training data's.
std::shared_ptr<const Dataset> openValidationSet(const Config& config, const JobLayout& layout,
                                                 const ModelSplit& split, const Dataset& train) {
  DataConfig val = config.data;
  val.path = config.data.val_path;
  val.targets.clear();  // an .npy validation set is a folder of the same names
  std::shared_ptr<const Dataset> data;
  if (isModelShaped(val)) {
    data = openDataset(val, dataRequestOf(split, layout.loss, config));
  } else {
    data = openDataFile(val, config.model.seq_len);
  }
  const std::string fields = fieldsText(data->fields());
  PPSTAGE_CHECK(fields == fieldsText(train.fields()), "--data.val_path '", val.path, "' gives ",
                fields, "; the training data gives ", fieldsText(train.fields()));
  checkHoldsOneBatch(*data, config.train.batch_size);
  checkTargetsOf(*data, layout,
                 outputSample(split.stages.back().outputs.at(0), config.train.batch_size),
                 config.train.ignore_index);
  return data;
}

// --train.loss model: the labels come from a data file and feed one of forward's
// arguments, and the first output is a scalar.
void checkModelComputesLoss(bool data_file, const DataRoles& roles, const ModelSplit& split) {
  PPSTAGE_CHECK(data_file, "--train.loss model passes the labels to the model: give a data ",
                "file with them (--data.path of a tokens, npy, tensors or idx file; text and ",
                "synthetic data have none to pass)");
  const auto fed = std::find(roles.inputs.begin(), roles.inputs.end(), roles.target);
  PPSTAGE_CHECK(
      fed != roles.inputs.end(), "--train.loss model passes the labels to the model, ",
      "but they feed none of forward's arguments (fed: ", joinText(split.graph.input_names, ", "),
      "); add them to --model.inputs (ARG=", "FIELD)");
  const TensorMeta& loss = split.stages.back().outputs.at(0).meta;
  checkModelLoss(loss.dtype, loss.sizes);
}

// The documents of `data` as --data.seq_len_policy pads them. Throws ppstage::Error for
// data that has no documents (npy, tensors, idx: samples of one shape).
std::shared_ptr<const SequenceBatches> sequencesOf(const Dataset& data, const Config& config) {
  PPSTAGE_CHECK(data.size() > 0 && data.length(0) > 0,
                "--data.documents and --data.seq_len_policy ", toString(config.data.seq_len_policy),
                " need text or a token file; ", data.describe(), " has samples of one shape");
  const int64_t max_length = data.fields().at(0).sample.shape.at(0);
  return std::make_shared<SequenceBatches>(SequenceBatches::of(data, config.data, max_length));
}

// Evaluation's model: captured in eval mode, cut where `train` is, sharing its parameters.
std::unique_ptr<EvalModel> planEval(const Config& config, const JobLayout& layout,
                                    const RankModel& train, const Dataset& train_data,
                                    const InputSpec* data_input) {
  const Topology& topology = layout.topology;
  const StagePlan& plan = train.split.plan;
  PipelineConfig pipeline = config.pipeline;
  pipeline.stages = static_cast<int64_t>(plan.numStages());
  pipeline.split_points.clear();
  pipeline.balance = Balance::kParams;  // one stage: nothing to balance, nothing to measure
  for (size_t s = 1; s < plan.stages.size(); ++s) {
    pipeline.split_points.push_back(plan.units.at(plan.stages[s].first_unit).path);
  }
  auto eval = std::make_unique<EvalModel>();
  Config eval_config = config;  // what training computes in, after any bf16 fallback
  eval_config.train.precision =
      train.split.compute_dtype == at::kFloat ? Precision::kFp32 : Precision::kBf16;
  eval->model.split =
      splitCaptured(captureForSplit(eval_config, data_input, /*training=*/false), pipeline);
  PPSTAGE_CHECK(eval->model.split.compute_dtype == train.split.compute_dtype,
                "--eval.every: the eval-mode model falls back to fp32 (",
                eval->model.split.precision_fallback, ") where training runs in bf16; train with ",
                "--train.precision fp32");
  shardLocalStages(config, topology, eval->model, train.tp_group);
  for (int s : topology.myStages()) {
    shareParameters(train.split.stages.at(static_cast<size_t>(s)),
                    eval->model.split.stages.at(static_cast<size_t>(s)));
  }
  eval->stages = compileLocalStages(config, topology, eval->model);
  // The stages hold what evaluation runs; the second copy of the model's tensors goes.
  releaseLoadedTensors(eval->model.split);
  eval->model.split.master_values.clear();  // evaluation steps nothing
  eval->data = openValidationSet(config, layout, train.split, train_data);
  if (layout.sequences) eval->sequences = sequencesOf(*eval->data, config);
  const int64_t samples = eval->data->size();
  eval->batches = samples == 0 ? config.eval.batches
                               : std::min(config.eval.batches, samples / config.train.batch_size);
  return eval;
}

// The model's split, cut on the data's first samples when the data file describes them.
ModelSplit splitForJob(const Config& config, const Topology& topology,
                       const UnitSeconds* unit_seconds, const InputSpec* data_input) {
  PipelineConfig pipeline = config.pipeline;
  pipeline.stages = topology.numStages();  // 0 (automatic) resolved by the layout
  std::optional<UnitTimes> times;
  if (unit_seconds != nullptr) times = unitTimesOf(*unit_seconds, config.pipeline, topology);
  ModelSplit split =
      splitCaptured(captureForSplit(config, data_input), pipeline, times ? &*times : nullptr);
  split.model.input.samples = nullptr;  // it holds the data set, which not every rank keeps
  return split;
}

// Everything local: no collective, so that runAgreed can report any rank's failure.
JobPlan planLocally(const Config& config, int rank, int world, const UnitSeconds* unit_seconds) {
  JobLayout layout = layoutOf(config, rank, world);
  const Topology& topology = layout.topology;
  std::optional<DataFile> file = openDataFileOf(config);
  std::shared_ptr<const Dataset> data = file ? file->data : nullptr;
  RankModel model;
  model.split = splitForJob(config, topology, unit_seconds, file ? &file->input : nullptr);
  if (file) {
    layout.roles = file->roles;
    layout.roles.inputs.clear();
    for (size_t f : model.split.input_fields)
      layout.roles.inputs.push_back(file->roles.offered_fields.at(f));
  }
  layout.loss = runLossKind(config, file ? &*file : nullptr, model.split.model.input);
  if (layout.loss == LossKind::kModel) {
    checkModelComputesLoss(file.has_value(), layout.roles, model.split);
  }
  const SampleShape output =
      outputSample(model.split.stages.back().outputs.at(0), config.train.batch_size);
  if (data) {
    checkTargetsOf(*data, layout, output, config.train.ignore_index);
  } else {
    data = openDataset(config.data, dataRequestOf(model.split, layout.loss, config));
  }
  const SampleShape& input = data->fields().at(layout.roles.inputs.at(0)).sample;
  const SampleShape& target = data->fields().at(layout.roles.target).sample;
  layout.token_inputs = at::isIntegralType(input.dtype, /*includeBool=*/false);
  layout.classifies = layout.loss == LossKind::kCrossEntropy && target.shape.empty();
  layout.compute_dtype = model.split.compute_dtype;
  layout.message_bytes =
      messageBytes(model.split, config.train.batch_size, layout.batch.microbatch_size,
                   planLength(config, model.split));
  layout.tokens_per_step = config.train.batch_size;
  if (layout.token_inputs) {
    for (int64_t d : input.shape) layout.tokens_per_step *= d;
  }
  checkHoldsOneBatch(*data, config.train.batch_size);
  if (config.data.cutsDocuments()) layout.sequences = sequencesOf(*data, config);
  const bool reads = topology.owns(0) || topology.owns(topology.numStages() - 1) || rank == 0;
  shardLocalStages(config, topology, model, nullptr);
  std::vector<LocalStage> stages = compileLocalStages(config, topology, model);
  std::unique_ptr<EvalModel> eval;
  if (config.eval.every > 0) {
    eval = planEval(config, layout, model, *data, file ? &file->input : nullptr);
    if (!reads) eval->data = nullptr;
  }
  releaseLoadedTensors(model.split);
  JobPlan plan(std::move(layout), std::move(model), reads ? data : nullptr, std::move(stages));
  plan.setEval(std::move(eval));
  return plan;
}

}  // namespace

LossKind runLossKind(const Config& config, const DataFile* file, const InputSpec& model_input) {
  return resolveLossKind(config.train.loss,
                         file != nullptr ? file->data->fields().at(file->roles.target).sample.dtype
                                         : model_input.dtype);
}

std::optional<DataFile> openDataFileOf(const Config& config) {
  if (isModelShaped(config.data)) return std::nullopt;
  DataFile file;
  file.data = openDataFile(config.data, config.model.seq_len);
  file.roles = dataRolesOf(*file.data, config.data, config.train.loss == LossKind::kModel);
  file.input = dataInputSpec(file.data, file.roles, config.data);
  return file;
}

JobPlan::JobPlan(JobLayout layout, RankModel model, std::shared_ptr<const Dataset> data,
                 std::vector<LocalStage> local_stages)
    : layout_(std::move(layout)),
      model_(std::move(model)),
      data_(std::move(data)),
      local_stages_(std::move(local_stages)) {}

void JobPlan::attachTensorParallel(Communicator& world) {
  const Topology& topology = layout_.topology;
  if (topology.tpSize() == 1) return;
  model_.tp_group->attach(world.split(topology.tensorParallelColor(), topology.tpRank()));
}

std::vector<LocalStage> JobPlan::takeLocalStages() {
  PPSTAGE_INTERNAL_ASSERT(!stages_taken_, "this rank's stages were taken already");
  stages_taken_ = true;
  return std::move(local_stages_);
}

BatchLayout batchLayout(int64_t batch_size, int dp, int microbatches) {
  const int64_t parts = static_cast<int64_t>(dp) * microbatches;
  PPSTAGE_CHECK(batch_size % parts == 0, "--train.batch_size ", batch_size,
                " is not divisible by --train.dp ", dp, " x --pipeline.microbatches ", microbatches,
                " (", parts, "): every micro-batch must have the same size");
  BatchLayout layout;
  layout.microbatches = microbatches;
  layout.local_batch = batch_size / dp;
  layout.microbatch_size = layout.local_batch / microbatches;
  return layout;
}

namespace {

std::string encodeSeconds(const UnitSeconds& seconds) {
  std::ostringstream out;
  out << std::setprecision(17) << seconds.forward.size();
  for (const double s : seconds.forward) out << " " << s;
  for (const double s : seconds.backward) out << " " << s;
  return out.str();
}

UnitSeconds decodeSeconds(const std::string& text) {
  std::istringstream in(text);
  size_t n = 0;
  in >> n;
  UnitSeconds seconds{std::vector<double>(n), std::vector<double>(n)};
  for (double& s : seconds.forward) in >> s;
  for (double& s : seconds.backward) in >> s;
  PPSTAGE_INTERNAL_ASSERT(!in.fail(), "unit seconds from rank 0: '", text, "'");
  return seconds;
}

// --pipeline.balance time: rank 0 measures the units (the others wait, so that its
// timings are not shared with them), and every rank plans with its seconds, so that all
// cut the same stages.
std::optional<UnitSeconds> agreedUnitSeconds(const Config& config, Communicator& world) {
  if (!balancesByTime(config.pipeline)) return std::nullopt;
  std::string mine;
  runAgreed(world, [&] {
    if (world.rank() != 0) return;
    setComputeThreads(computeThreads(config.train, world.size()));
    const Topology topology = jobTopology(config.pipeline, config.train, world.size());
    const std::optional<DataFile> file = openDataFileOf(config);
    const CapturedModel captured = captureForSplit(config, file ? &file->input : nullptr);
    const LossKind loss = runLossKind(config, file ? &*file : nullptr, captured.model.input);
    mine = encodeSeconds(measureUnitSeconds(captured, config, topology, loss));
  });
  return decodeSeconds(allGatherStrings(world, mine).at(0));
}

}  // namespace

JobPlan planJob(const Config& config, Communicator& world) {
  const std::optional<UnitSeconds> seconds = agreedUnitSeconds(config, world);
  std::optional<JobPlan> plan;
  runAgreed(world, [&] {
    plan.emplace(planLocally(config, world.rank(), world.size(), seconds ? &*seconds : nullptr));
  });
  plan->attachTensorParallel(world);
  return std::move(*plan);
}

}  // namespace ppstage
