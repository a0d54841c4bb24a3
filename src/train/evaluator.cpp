// See evaluator.h.
#include "evaluator.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>

#include "local_stages.h"
#include "pipeline_messages.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/clock.h"
#include "ppstage/data/sequence_batches.h"
#include "ppstage/runtime/executor.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/schedule/forward_only.h"
#include "ppstage/train/job_setup.h"
#include "ppstage/train/trainer.h"

namespace ppstage {

Evaluator::Evaluator(const Config& config, const JobLayout& layout, EvalModel& eval,
                     const JobCommunicators& comms)
    : config_(config), layout_(layout), eval_(eval), world_(comms.control) {
  ExecutorOptions options;
  options.device = torchDevice(layout.device);
  options.microbatch_size = layout.batch.microbatch_size;
  options.loss = layout.loss;
  options.ignore_index = config.train.ignore_index;
  options.compute_dtype = eval.model.split.compute_dtype;
  options.seed = config.train.seed;
  options.receives_ahead = config.comm.receives_ahead;
  options.forward_only = true;
  if (eval.sequences && eval.sequences->varies()) options.max_length = eval.sequences->maxLength();
  const Topology& topology = layout.topology;
  PipelineMessages messages = pipelineMessages(comms.data, topology, layout.schedule.request,
                                               forwardOnlySchedule(layout.schedule.request));
  channels_ = std::move(messages.channels);
  executor_ = std::make_unique<Executor>(*messages.comm, topology, std::move(eval.stages),
                                         std::move(messages.actions), options);
}

Evaluator::~Evaluator() = default;

bool Evaluator::dueAfter(int64_t step) const {
  const int64_t every = config_.eval.every;
  return every > 0 && ((step + 1) % every == 0 || step + 1 == config_.train.steps);
}

EvalResult Evaluator::run(int64_t steps) {
  const auto start = std::chrono::steady_clock::now();
  const Topology& topology = layout_.topology;
  const BatchLayout& batch = layout_.batch;
  const bool reads_inputs = topology.owns(0);
  const bool reads_targets = topology.owns(topology.numStages() - 1);
  // This rank's sums over the batches: the loss terms, the labels predicted right, and the
  // targets counted (the last stage's ranks only; the all-reduce adds the replicas).
  double sums[3] = {0, 0, 0};
  const bool counts = topology.tpRank() == 0;  // tensor-parallel ranks compute the same loss
  const SequenceBatches* sequences = eval_.sequences.get();
  const int64_t samples = sequences ? sequences->size() : eval_.data ? eval_.data->size() : 0;
  const int64_t ignore = config_.train.ignore_index;
  for (int64_t b = 0; b < eval_.batches; ++b) {
    StepData data;  // targets_in_step 1: the executor's loss_sum is the sum of the terms
    std::vector<int64_t> indices;  // the global batch, in order (documents: by length)
    for (int64_t i = 0; i < config_.train.batch_size; ++i) {
      const int64_t position = b * config_.train.batch_size + i;
      indices.push_back(samples > 0 ? position % samples : position);
    }
    if (sequences) indices = sequences->arrange(std::move(indices), topology.dpSize());
    for (int m = 0; m < batch.microbatches; ++m) {
      const int64_t first = topology.dpRank() * batch.local_batch + m * batch.microbatch_size;
      const int64_t size = batch.microbatch_size;
      if (sequences && sequences->varies()) {
        data.lengths.push_back(sequences->paddedLength(indices, first, size));
      }
      if (reads_inputs) {
        data.inputs.push_back(microBatchOf(*eval_.data, layout_.roles.inputs, indices, first, size,
                                           sequences, {layout_.roles.target, ignore}));
      }
      if (reads_targets) {
        data.targets.push_back(microBatchOf(*eval_.data, {layout_.roles.target}, indices, first,
                                            size, sequences, {layout_.roles.target, ignore})
                                   .at(0));
        if (counts) {
          sums[2] += static_cast<double>(countTargets(layout_.loss, data.targets.back(), ignore));
        }
      }
    }
    const StepStats stats = executor_->runStep(steps, data);
    if (!counts) continue;
    sums[0] += stats.loss_sum;
    sums[1] += static_cast<double>(stats.correct);
  }
  at::Tensor reduced = at::tensor({sums[0], sums[1], sums[2]}, at::kDouble);
  world_.allReduceSum({reduced});
  const double counted = std::max(1.0, reduced[2].item<double>());
  EvalResult result;
  result.step = steps;
  result.loss = reduced[0].item<double>() / counted;
  result.accuracy = layout_.classifies ? reduced[1].item<double>() / counted : std::nan("");
  result.seconds = secondsSince(start);
  return result;
}

}  // namespace ppstage
