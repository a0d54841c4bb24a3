// See step_runner.h.
#include "step_runner.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "ppstage/comm/communicator.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/train/gradient_sync.h"
#include "ppstage/train/job_plan.h"
#include "ppstage/train/optimizer.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// Micro-batches of this replica's samples: `indices[begin, begin + local_batch)`.
std::vector<at::Tensor> cutMicrobatches(const Dataset& data, const std::vector<int64_t>& indices,
                                        int64_t begin, const BatchLayout& layout, bool targets) {
  std::vector<at::Tensor> out;
  for (int m = 0; m < layout.microbatches; ++m) {
    const auto first = indices.begin() + begin + m * layout.microbatch_size;
    const std::vector<int64_t> part(first, first + layout.microbatch_size);
    out.push_back(targets ? stackTargets(data, part) : stackInputs(data, part));
  }
  return out;
}

// Both neighbours of every boundary agree on what crosses it before the first step.
void exchangeBoundarySpecs(const JobPlan& plan, Communicator& world) {
  const Topology& topology = plan.topology;
  for (const LocalStage& stage : plan.local_stages) {
    const int s = stage.module->index;
    if (s > 0 && !topology.owns(s - 1)) {
      exchangeBoundarySpec(world, topology.prevRank(s), stage.input_spec, false);
    }
    if (s + 1 < topology.numStages() && !topology.owns(s + 1)) {
      exchangeBoundarySpec(world, topology.nextRank(s), stage.output_spec, true);
    }
  }
}

}  // namespace

StepRunner::StepRunner(const Config& config, JobPlan& plan, Communicator& world)
    : config_(config), plan_(plan), world_(world) {
  exchangeBoundarySpecs(plan, world);
  sync_ = std::make_unique<GradientSync>(world, plan.topology, plan.my_stages, plan.split.ties);
  params_ = sync_->parameters();
  optimizer_ = makeOptimizer(config.train, params_);

  ExecutorOptions options;
  options.microbatch_size = plan.batch.microbatch_size;
  options.loss = plan.loss;
  options.loss_scale =
      1.0 / (static_cast<double>(plan.batch.microbatches) * plan.topology.dpSize());
  options.seed = config.train.seed;
  options.first_microbatch = static_cast<int64_t>(plan.topology.dpRank()) * plan.batch.microbatches;
  const ActionList& actions = plan.schedule.ranks.at(static_cast<size_t>(plan.topology.ppRank()));
  executor_ = std::make_unique<Executor>(world, plan.topology, std::move(plan.local_stages),
                                         actions, options);
  order_ = std::make_unique<SampleOrder>(plan.data ? plan.data->size() : 0, config.train.seed);
}

StepRunner::~StepRunner() = default;

StepResult StepRunner::run(int64_t step) {
  const Topology& topology = plan_.topology;
  const bool reads_inputs = topology.owns(0);
  const bool reads_targets = topology.owns(topology.numStages() - 1);
  std::vector<at::Tensor> inputs, targets;
  if (reads_inputs || reads_targets) {
    const std::vector<int64_t> indices = order_->batch(step, config_.train.batch_size);
    const int64_t replica_begin = topology.dpRank() * plan_.batch.local_batch;
    if (reads_inputs) {
      inputs = cutMicrobatches(*plan_.data, indices, replica_begin, plan_.batch, false);
    }
    if (reads_targets) {
      targets = cutMicrobatches(*plan_.data, indices, replica_begin, plan_.batch, true);
    }
  }
  const auto start = Clock::now();
  const StepStats stats = executor_->runStep(step, inputs, targets);
  sync_->synchronize();

  StepReduce mine;
  mine.loss = stats.loss_sum;
  mine.norm_squared = sync_->squaredNormShare();
  for (size_t k = 0; k < mine.costs.size(); ++k) {
    mine.costs[k] = {stats.compute_s[k], static_cast<double>(stats.compute_count[k])};
  }
  mine.graphs_compiled = static_cast<double>(plan_.compile_cache->stats().graphs_compiled);
  mine.respecializations = static_cast<double>(plan_.compile_cache->stats().respecializations);
  mine.busy_s.assign(static_cast<size_t>(world_.size()), 0.0);
  mine.busy_s[static_cast<size_t>(world_.rank())] = stats.busy_s();
  at::Tensor packed = mine.pack();
  world_.allReduceSum({packed});

  StepResult result;
  result.reduced = StepReduce::unpack(packed);
  result.loss = result.reduced.loss;
  result.grad_norm = std::sqrt(result.reduced.norm_squared);
  const double coefficient = clipCoefficient(result.grad_norm, config_.train.grad_clip);
  if (coefficient < 1) sync_->scale(coefficient);
  stepAndClear(*optimizer_, params_);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.rss_mb = currentRssMb();
  double idle = 0;
  for (double busy : result.reduced.busy_s) idle += std::max(0.0, result.seconds - busy);
  result.bubble = idle / (world_.size() * result.seconds);
  return result;
}

}  // namespace ppstage
