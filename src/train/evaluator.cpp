// See evaluator.h.
#include "evaluator.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>

#include "ppstage/comm/communicator.h"
#include "ppstage/runtime/executor.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/schedule/forward_only.h"
#include "ppstage/train/job_plan.h"

namespace ppstage {

Evaluator::Evaluator(const Config& config, const JobLayout& layout, EvalModel& eval,
                     Communicator& world)
    : config_(config), layout_(layout), eval_(eval), world_(world) {
  ExecutorOptions options;
  options.microbatch_size = layout.batch.microbatch_size;
  options.loss = layout.loss;
  options.ignore_index = config.train.ignore_index;
  options.compute_dtype = eval.model.split.compute_dtype;
  options.seed = config.train.seed;
  options.receives_ahead = config.comm.receives_ahead;
  options.forward_only = true;
  const Topology& topology = layout.topology;
  ActionList actions =
      forwardOnlySchedule(layout.schedule.request).at(static_cast<size_t>(topology.ppRank()));
  executor_ = std::make_unique<Executor>(world, topology, std::move(eval.stages),
                                         std::move(actions), options);
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
  for (int64_t b = 0; b < eval_.batches; ++b) {
    StepData data;  // targets_in_step 1: the executor's loss_sum is the sum of the terms
    const int64_t first = b * config_.train.batch_size + topology.dpRank() * batch.local_batch;
    for (int m = 0; m < batch.microbatches && (reads_inputs || reads_targets); ++m) {
      std::vector<int64_t> indices;
      for (int64_t i = 0; i < batch.microbatch_size; ++i) {
        const int64_t position = first + m * batch.microbatch_size + i;
        indices.push_back(eval_.data->size() > 0 ? position % eval_.data->size() : position);
      }
      if (reads_inputs)
        data.inputs.push_back(stackFields(*eval_.data, layout_.roles.inputs, indices));
      if (reads_targets) {
        data.targets.push_back(stackField(*eval_.data, layout_.roles.target, indices));
        sums[2] += static_cast<double>(
            countTargets(layout_.loss, data.targets.back(), config_.train.ignore_index));
      }
    }
    const StepStats stats = executor_->runStep(steps, data);
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
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace ppstage
