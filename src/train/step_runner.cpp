// See step_runner.h.
#include "step_runner.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>

#include "local_stages.h"
#include "pipeline_messages.h"
#include "ppstage/checkpoint/model_identity.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/comm/failure_channel.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/interrupt.h"
#include "ppstage/core/units.h"
#include "ppstage/data/sequence_batches.h"
#include "ppstage/observe/chrome_trace.h"
#include "ppstage/observe/clock_alignment.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/observe/trace.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/runtime/optimizer.h"
#include "ppstage/train/gradient_sync.h"
#include "ppstage/train/job_setup.h"
#include "ppstage/train/lr_schedule.h"
#include "ppstage/train/master_weights.h"
#include "ppstage/train/stop_signal.h"
#include "ppstage/train/trainer.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// Micro-batches of this replica's samples of `fields`, [m][field]:
// `indices[begin, begin + local_batch)`; documents (`sequences` not null) padded as
// `padding` says to the length the policy gives each micro-batch.
std::vector<std::vector<at::Tensor>> cutMicrobatches(const Dataset& data,
                                                     const std::vector<size_t>& fields,
                                                     const std::vector<int64_t>& indices,
                                                     int64_t begin, const BatchLayout& layout,
                                                     const SequenceBatches* sequences,
                                                     const Padding& padding) {
  std::vector<std::vector<at::Tensor>> out;
  for (int m = 0; m < layout.microbatches; ++m) {
    out.push_back(microBatchOf(data, fields, indices, begin + m * layout.microbatch_size,
                               layout.microbatch_size, sequences, padding));
  }
  return out;
}

// "nan", "inf" or "-inf" (printf's "-nan" says nothing more).
std::string nonfiniteText(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return detail::concat(x);
}

// The smallest set (positive) slot of every rank's, 0 when none is set: the slots hold an
// index + 1, so the smallest is the first in model order.
double firstSetSlot(const std::vector<double>& slots) {
  double first = 0;
  for (double slot : slots) {
    if (slot > 0 && (first == 0 || slot < first)) first = slot;
  }
  return first;
}

// Where a step's NaN or inf first appeared, from every rank's slots: the loss of the first
// micro-batch that had one, else the gradient of the first parameter (in stage order).
std::string whereNonfinite(const StepResult& result, const ModelSplit& split) {
  const StepReduce& r = result.reduced;
  const int last = static_cast<int>(split.stages.size()) - 1;
  const double microbatch = firstSetSlot(r.nonfinite_microbatch);
  if (microbatch > 0) {
    return detail::concat("the loss of micro-batch ", static_cast<int64_t>(microbatch) - 1,
                          " (stage ", last, ") is ", nonfiniteText(result.loss));
  }
  const double parameter = firstSetSlot(r.nonfinite_parameter);
  if (parameter > 0) {
    const auto code = static_cast<int64_t>(parameter) - 1;
    const auto slots = static_cast<int64_t>(StepReduce::kParameterSlots);
    const StageModule& stage = split.stages.at(static_cast<size_t>(code / slots));
    return detail::concat("the gradient of ", stage.parameters.at(code % slots).name, " (stage ",
                          stage.index, ") is not finite; the gradient norm is ",
                          nonfiniteText(result.grad_norm));
  }
  return detail::concat("the loss is ", nonfiniteText(result.loss), " and the gradient norm ",
                        nonfiniteText(result.grad_norm));
}

// The mean seconds of each kind of action, over this rank and per stage, and the bytes a
// micro-batch kept per stage, into `result`.
void addActionSeconds(const StepStats& stats, StepResult& result) {
  const auto mean = [](double seconds, int64_t count) {
    return count > 0 ? seconds / static_cast<double>(count) : std::nan("");
  };
  for (const ActionKind kind : PerCompute<double>::kinds()) {
    result.action_s[kind] = mean(stats.compute_s[kind], stats.compute_count[kind]);
  }
  result.stage_kept_bytes = stats.stage_kept_bytes;
  for (size_t i = 0; i < stats.stage_compute_s.size(); ++i) {
    PerCompute<double>& stage = result.stage_action_s.emplace_back();
    for (const ActionKind kind : PerCompute<double>::kinds()) {
      stage[kind] = mean(stats.stage_compute_s[i][kind], stats.stage_compute_count[i][kind]);
    }
  }
}

// The fp32 values of this rank's trainable stage parameters, in GradientSync::parameters'
// order (bf16: what the master weights start from).
std::vector<at::Tensor> masterValues(const RankModel& model) {
  std::vector<at::Tensor> values;
  for (const StageModule* stage : model.mine) {
    for (const StageParameter& p : stage->parameters) {
      if (!p.is_parameter || !p.value.requires_grad()) continue;
      const std::string& path = model.split.graph.parameters.at(p.model_parameters.at(0)).path;
      const auto master = model.split.master_values.find(path);
      PPSTAGE_CHECK(master != model.split.master_values.end(), "--train.precision bf16: '", path,
                    "' was not cast to bf16 (a tensor inside a list or dict attribute?); train ",
                    "with --train.precision fp32");
      values.push_back(master->second);
    }
  }
  return values;
}

// The boundaries between this rank's stages and other ranks' (transfer_probe.h): both
// neighbours of each agree on what crosses it before the first step, and the transfer
// probe times it after the last.
std::vector<BoundaryLink> remoteLinks(const Topology& topology,
                                      const std::vector<LocalStage>& stages) {
  std::vector<BoundaryLink> links;
  const int last = topology.numStages() - 1;
  for (const LocalStage& stage : stages) {
    const int s = stage.module->index;
    if (s > 0 && !topology.owns(s - 1)) {
      links.push_back({s, topology.prevRank(s), true, stage.input_spec});
    }
    if (s < last && !topology.owns(s + 1)) {
      links.push_back({s + 1, topology.nextRank(s), false, stage.output_spec});
    }
  }
  return links;
}

}  // namespace

StepRunner::StepRunner(const Config& config, const JobLayout& layout, const RankModel& model,
                       const Dataset* data, std::vector<LocalStage> stages,
                       const JobCommunicators& comms)
    : config_(config),
      layout_(layout),
      model_(model),
      data_(data),
      world_(comms.control),
      collectives_(comms.collectives()) {
  links_ = remoteLinks(layout.topology, stages);
  for (const BoundaryLink& link : links_) {
    exchangeBoundarySpec(world_, link.peer, link.spec, /*sender_side=*/!link.receiver);
  }
  sync_ =
      std::make_unique<GradientSync>(collectives_, layout.topology, model.mine, model.split.ties);
  params_ = sync_->parameters();
  saves_on_stop_ = !config.checkpoint.dir.empty();
  for (const StageModule* stage : model.mine) {
    for (const StageParameter& p : stage->parameters) {
      if (!p.is_parameter && !p.random_key) buffers_.push_back(p.value);
    }
  }
  const bool fp32 = model.split.compute_dtype == at::kFloat;
  if (config.train.shard_optimizer && sync_->dataParallelGroup() != nullptr) {
    sharded_ = std::make_unique<ShardedOptimizer>(
        config.train, params_, fp32 ? params_ : masterValues(model), *sync_->dataParallelGroup());
  } else if (fp32) {
    if (config.train.shard_optimizer && world_.rank() == 0) {
      std::cerr << "ppstage: warning: --train.shard_optimizer true at dp 1 does nothing: one "
                   "replica holds the whole optimizer state\n";
    }
    optimizer_ = makeOptimizer(config.train, params_);
  } else {
    masters_ = std::make_unique<MasterWeights>(params_, masterValues(model));
    optimizer_ = makeOptimizer(config.train, masters_->masters());
  }

  ExecutorOptions options;
  options.device = torchDevice(layout.device);
  options.microbatch_size = layout.batch.microbatch_size;
  options.loss = layout.loss;
  options.ignore_index = config.train.ignore_index;
  options.compute_dtype = model.split.compute_dtype;
  options.seed = config.train.seed;
  options.first_microbatch =
      static_cast<int64_t>(layout.topology.dpRank()) * layout.batch.microbatches;
  if (!config.output.trace.empty()) {
    trace_ = std::make_unique<TraceRecorder>();
    clock_ = std::make_unique<ClockAlignment>(alignClocks(world_));
    options.trace = trace_.get();
    if (model.tp_group) model.tp_group->setTrace(trace_.get());
    model.compile_cache->setTrace(trace_.get());
  }
  options.receives_ahead = config.comm.receives_ahead;
  if (layout.sequences && layout.sequences->varies()) {
    options.max_length = layout.sequences->maxLength();
  }
  PipelineMessages messages =
      pipelineMessages(comms.data, layout.topology, layout.schedule.request, layout.schedule.ranks);
  channels_ = std::move(messages.channels);
  executor_ = std::make_unique<Executor>(*messages.comm, layout.topology, std::move(stages),
                                         std::move(messages.actions), options);
  // Documents: every rank orders the samples, to know each micro-batch's length.
  data_samples_ = layout.sequences ? layout.sequences->size() : data ? data->size() : 0;
  order_ = std::make_unique<SampleOrder>(data_samples_, config.train.seed);
}

StepRunner::~StepRunner() = default;

size_t StepRunner::indexOf(const at::Tensor& parameter) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl()) return i;
  }
  return params_.size();
}

at::Tensor StepRunner::masterOf(const at::Tensor& parameter) const {
  if (sharded_) {
    const size_t i = indexOf(parameter);
    if (i == params_.size()) return parameter;
    if (!whole_) {
      whole_ = std::make_unique<ShardedOptimizer::WholeState>();
      whole_->masters.resize(params_.size());
      whole_->state.resize(params_.size());
    }
    at::Tensor& master = whole_->masters[i];
    if (!master.defined()) master = parameter.detach().to(at::kFloat, false, /*copy=*/true);
    return master;
  }
  return masters_ ? masters_->masterOf(parameter) : parameter;
}

std::map<std::string, at::Tensor> StepRunner::optimizerStateOf(const at::Tensor& parameter) const {
  if (!sharded_) return optimizerState(*optimizer_, masterOf(parameter));
  PPSTAGE_INTERNAL_ASSERT(whole_ != nullptr, "optimizer state read before prepareSave");
  return whole_->state.at(indexOf(parameter));
}

void StepRunner::loadOptimizerState(const at::Tensor& parameter,
                                    const std::map<std::string, at::Tensor>& state,
                                    const std::string& path) {
  if (!sharded_) {
    setOptimizerState(*optimizer_, masterOf(parameter), state, path);
    return;
  }
  masterOf(parameter);  // makes whole_
  whole_->state.at(indexOf(parameter)) = state;
}

void StepRunner::prepareSave() {
  if (sharded_) whole_ = std::make_unique<ShardedOptimizer::WholeState>(sharded_->gatherState());
}

int64_t StepRunner::optimizerStateBytes() const {
  if (sharded_) return sharded_->stateBytes();
  int64_t bytes = 0;
  for (const at::Tensor& p : params_) {
    for (const auto& [name, tensor] : optimizerState(*optimizer_, masterOf(p))) {
      bytes += static_cast<int64_t>(tensor.nbytes());
    }
  }
  return bytes;
}

int64_t StepRunner::masterBytes() const {
  if (sharded_) return sharded_->masterBytes();
  int64_t bytes = 0;
  if (masters_) {
    for (const at::Tensor& p : params_) bytes += static_cast<int64_t>(masterOf(p).nbytes());
  }
  return bytes;
}

at::Tensor StepRunner::storedValueOf(const at::Tensor& tensor) const {
  const at::Tensor value = masterOf(tensor);
  return value.scalar_type() == storedDtype(value) ? value : value.to(storedDtype(value));
}

void StepRunner::mastersLoaded() {
  if (sharded_ && whole_) {
    sharded_->loadState(*whole_);
    whole_.reset();
  }
  if (masters_) masters_->copyToCompute();
}

StepData StepRunner::nextStepData() {
  const Topology& topology = layout_.topology;
  const SequenceBatches* sequences = layout_.sequences.get();
  const bool reads_inputs = topology.owns(0);
  const bool reads_targets = topology.owns(topology.numStages() - 1);
  const int64_t batch_size = config_.train.batch_size;
  StepData data;
  data.tokens = data.padded_tokens = layout_.tokens_per_step;
  if (reads_inputs || reads_targets || sequences != nullptr) {
    std::vector<int64_t> indices = order_->samples(samples_seen_, batch_size);
    const BatchLayout& batch = layout_.batch;
    const int64_t replica_begin = topology.dpRank() * batch.local_batch;
    if (sequences != nullptr) {
      indices = sequences->arrange(std::move(indices), topology.dpSize());
      data.tokens = data.padded_tokens = 0;
      for (int64_t first = 0; first < batch_size; first += batch.microbatch_size) {
        const int64_t length = sequences->paddedLength(indices, first, batch.microbatch_size);
        data.padded_tokens += length * batch.microbatch_size;
        const bool mine = first >= replica_begin && first < replica_begin + batch.local_batch;
        if (mine && sequences->varies()) data.lengths.push_back(length);
      }
      for (const int64_t i : indices) data.tokens += sequences->length(i);
    }
    if (reads_inputs) {
      data.inputs = cutMicrobatches(*data_, layout_.roles.inputs, indices, replica_begin, batch,
                                    sequences, paddingOf());
    }
    if (reads_targets) data = withTargets(std::move(data), indices, replica_begin);
  }
  samples_seen_ += batch_size;
  return data;
}

void StepRunner::startGradients() {
  if (masters_) masters_->startStep();                         // bf16 gradients accumulate in fp32
  if (sharded_ && model_.split.compute_dtype != at::kFloat) {  // so do sharded ones
    for (at::Tensor p : params_) {
      p.mutable_grad() = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
    }
  }
}

void StepRunner::synchronizeGradients() {
  sync_->synchronize(/*data_parallel=*/sharded_ == nullptr);
  if (sharded_) sharded_->reduceGradients(sync_->tiedParameters());  // each rank its share
}

bool StepRunner::runActions(int64_t step, const StepData& data, StepStats& stats,
                            const std::function<void()>& actions_ended) {
  if (!saves_on_stop_) {
    stats = executor_->runStep(step, data);
    actions_ended();
    synchronizeGradients();
    return false;
  }
  buffers_at_start_.clear();  // as the step found them (BatchNorm's statistics)
  for (const at::Tensor& buffer : buffers_) buffers_at_start_.push_back(buffer.clone());
  bool ended = false;
  try {
    const InterruptibleScope interruptible;  // Note [Abandoning a step]
    stats = executor_->runStep(step, data);
    ended = true;
    actions_ended();
    synchronizeGradients();
    return false;
  } catch (const StepInterrupted&) {
    if (!ended) actions_ended();
    sendStopNotices();  // to ranks that wait on this one and got no signal
    stats = StepStats{};
    return true;
  }
}

StepResult StepRunner::abandoned(int64_t samples_before, StepReduce reduced) {
  StepResult result;
  result.abandoned = true;
  result.reduced = std::move(reduced);
  result.stop_signal = jobStopSignal(result.reduced.stop_signal);
  {
    // Every rank, also one whose actions ended: the buffers its forwards wrote go back.
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_at_start_.size(); ++i) buffers_[i].copy_(buffers_at_start_[i]);
  }
  samples_seen_ = samples_before;  // the step's batch is the next one again
  if (masters_) masters_->clearGradients();
  if (sharded_) sharded_->clearGradients();
  clearGradients(params_);
  // A tensor-parallel all-reduce cut short may have left messages on the group's
  // communicator that the save's gathers would match: they get a fresh one (collective).
  if (model_.tp_group) {
    const Topology& topology = layout_.topology;
    model_.tp_group->attach(collectives_.split(topology.tensorParallelColor(), topology.tpRank()));
  }
  return result;
}

StepResult StepRunner::run(int64_t step) {
  const at::Device device = torchDevice(layout_.device);  // whose memory the step reports
  const int64_t bytes_at_start = tensorBytesNow(device);
  resetTensorBytesPeak(device);
  const int64_t samples_before = samples_seen_;
  const StepData data = nextStepData();
  startGradients();
  TpGroup* tp = model_.tp_group.get();
  const double tp_s_before = tp ? tp->seconds() : 0;
  const int64_t tp_calls_before = tp ? tp->calls() : 0;
  const auto start = Clock::now();
  StepStats stats;
  Clock::time_point actions_end = start;
  int64_t traced = 0;
  const bool abandoning = runActions(step, data, stats, [&] {
    actions_end = Clock::now();  // the gradient sync follows: the tail, traced as its own
    traced = trace_ ? TraceRecorder::now() : 0;
  });
  // Adds the span from the last traced instant to now as a `kind` event.
  const auto trace = [&](TraceKind kind) {
    if (!trace_) return;
    const int64_t now = TraceRecorder::now();
    trace_->add(kind, traced, now);
    traced = now;
  };
  trace(TraceKind::kGradientSync);
  const TensorPeak memory{bytes_at_start, tensorBytesPeak(device)};  // before optimizer state

  StepResult result;
  result.reduced =
      StepReduce::unpack(allReduceStep(stats, memory, data.targets_in_step, abandoning));
  trace(TraceKind::kAllReduce);
  if (result.reduced.abandoned > 0) return abandoned(samples_before, std::move(result.reduced));
  result.loss = result.reduced.loss;
  result.accuracy = layout_.classifies ? result.reduced.accuracy : std::nan("");
  result.grad_norm = std::sqrt(result.reduced.norm_squared);
  result.stop_signal = jobStopSignal(result.reduced.stop_signal);
  result.finite = std::isfinite(result.loss) && std::isfinite(result.grad_norm);
  result.lr = learningRate(config_.train, step);
  applyGradients(result);
  trace(TraceKind::kOptimizer);
  const auto end = Clock::now();
  result.seconds = secondsBetween(start, end);
  result.tail_s = secondsBetween(actions_end, end);
  addActionSeconds(stats, result);
  result.wait_s = stats.wait_s;
  result.receive_buffers_allocated = stats.receive_buffers_allocated;
  result.tp_s = tp ? tp->seconds() - tp_s_before : 0;
  result.tp_all_reduces = tp ? tp->calls() - tp_calls_before : 0;
  result.rss_mb = currentRssMb();
  result.tensor_mb = mib(tensorBytesNow(device));
  result.tokens = data.tokens;
  result.padded_tokens = data.padded_tokens;
  result.microbatch_lengths = data.lengths;
  result.epoch = data_samples_ > 0 ? static_cast<double>(samples_seen_) / data_samples_ : NAN;
  double idle = 0;
  for (double busy : result.reduced.busy_s) idle += std::max(0.0, result.seconds - busy);
  result.bubble = idle / (world_.size() * result.seconds);
  return result;
}

void StepRunner::applyGradients(StepResult& result) {
  whole_.reset();  // what a save gathered is the step's before
  if (!result.finite) {
    result.nonfinite = whereNonfinite(result, model_.split);
    if (masters_) masters_->clearGradients();
    if (sharded_) sharded_->clearGradients();
    clearGradients(params_);
    return;
  }
  const double coefficient = clipCoefficient(result.grad_norm, config_.train.grad_clip);
  if (sharded_) {
    if (coefficient < 1) sharded_->scale(coefficient);
    sharded_->step(result.lr);
    return;
  }
  if (coefficient < 1) sync_->scale(coefficient);
  setLearningRate(*optimizer_, result.lr);
  if (masters_) {
    masters_->step(*optimizer_);
  } else {
    stepAndClear(*optimizer_, params_);
  }
}

Padding StepRunner::paddingOf() const { return {layout_.roles.target, config_.train.ignore_index}; }

StepData StepRunner::withTargets(StepData data, const std::vector<int64_t>& indices,
                                 int64_t replica_begin) const {
  // The whole step's targets (every replica's), to count what the step's mean divides by;
  // a step whose targets are all ignored counts 1, so that its loss and gradients are 0.
  const BatchLayout& batch = layout_.batch;
  const int64_t ignore = config_.train.ignore_index;
  int64_t counted = 0;
  for (int64_t first = 0; first < config_.train.batch_size; first += batch.microbatch_size) {
    const at::Tensor targets =
        microBatchOf(*data_, {layout_.roles.target}, indices, first, batch.microbatch_size,
                     layout_.sequences.get(), paddingOf())
            .at(0);
    counted += countTargets(layout_.loss, targets, ignore);
    if (first >= replica_begin && first < replica_begin + batch.local_batch) {
      data.targets.push_back(targets);
    }
  }
  data.targets_in_step = layout_.loss == LossKind::kModel
                             ? layout_.topology.dpSize() * batch.microbatches
                             : std::max<int64_t>(1, counted);
  return data;
}

TransferSeconds StepRunner::measureTransfers() {
  const SequenceBatches* sequences = layout_.sequences.get();
  return ppstage::measureTransfers(world_, links_, layout_.batch.microbatch_size,
                                   sequences && sequences->varies() ? sequences->maxLength() : 0);
}

int64_t StepRunner::writeTrace() {
  PPSTAGE_INTERNAL_ASSERT(trace_ != nullptr, "writeTrace without --output.trace");
  const Topology& t = layout_.topology;
  const std::string track = rankTrackName(t.rank(), t.myStages(), t.dpSize() > 1 ? t.dpRank() : -1);
  const std::vector<std::pair<std::string, std::string>> about = {
      {"producer", "ppstage train"},
      {"model", config_.model.name},
      {"schedule", layout_.schedule.name},
      {"stages", std::to_string(t.numStages())},
      {"pp", std::to_string(t.ppSize())},
      {"dp", std::to_string(t.dpSize())},
      {"tp", std::to_string(t.tpSize())},
      {"microbatches", std::to_string(layout_.batch.microbatches)},
      {"compile", toString(config_.compile.mode)},
  };
  writeChromeTrace(world_, *trace_, *clock_, track, about, config_.output.trace);
  return static_cast<int64_t>(trace_->events().size());
}

at::Tensor StepRunner::allReduceStep(const StepStats& stats, const TensorPeak& memory,
                                     int64_t targets_in_step, bool abandoning) {
  StepReduce mine;
  // Every replica's last stage adds its share (its first tensor-parallel rank: the others
  // compute the same loss): the sums are the step's loss and accuracy.
  const bool counts = layout_.topology.tpRank() == 0;
  mine.loss = counts ? stats.loss_sum : 0;
  mine.accuracy =
      counts ? static_cast<double>(stats.correct) / static_cast<double>(targets_in_step) : 0;
  mine.norm_squared = abandoning ? 0
                      : sharded_ ? sharded_->squaredNormShare(sync_->countsInNorm())
                                 : sync_->squaredNormShare();
  mine.abandoned = abandoning ? 1 : 0;
  for (const ActionKind kind : PerCompute<double>::kinds()) {
    mine.costs[kind] = {stats.compute_s[kind], static_cast<double>(stats.compute_count[kind])};
  }
  mine.graphs_compiled = static_cast<double>(model_.compile_cache->stats().graphs_compiled);
  mine.respecializations = static_cast<double>(model_.compile_cache->stats().respecializations);
  mine.sizeSlots(world_.size());
  const auto me = static_cast<size_t>(world_.rank());
  mine.busy_s[me] = stats.busy_s();
  mine.stop_signal[me] = StopSignal::received();
  mine.nonfinite_microbatch[me] = static_cast<double>(stats.first_nonfinite_microbatch + 1);
  mine.peak_allocated_mb[me] = mib(memory.peak);
  mine.peak_activation_mb[me] = mib(memory.peak - memory.at_start);
  if (!abandoning && !std::isfinite(mine.norm_squared)) {
    const auto [stage, parameter] = sync_->firstNonfiniteGradient();
    if (stage >= 0) {
      mine.nonfinite_parameter[me] = stage * StepReduce::kParameterSlots + parameter + 1;
    }
  }
  at::Tensor packed = mine.pack();
  world_.allReduceSum({packed});
  return packed;
}

}  // namespace ppstage
