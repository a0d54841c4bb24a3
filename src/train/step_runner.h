// The second phase of `ppstage train`: one optimizer step at a time, on every rank.
//
// A step: this replica's slice of the global batch cut into micro-batches, the executor
// runs the rank's actions (runtime/executor.h), GradientSync sums data-parallel and tied
// gradients, one world all-reduce (StepReduce) gives the loss, the global gradient norm,
// the per-kind action costs and every rank's busy time, the gradients are clipped and the
// optimizer steps.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "step_reduce.h"

namespace torch::optim {
class Optimizer;
}

namespace ppstage {

class Communicator;
class Executor;
class GradientSync;
class SampleOrder;
struct Config;
struct JobPlan;

// What one step did, over the whole job.
struct StepResult {
  double loss = 0;       // the mean loss of the step's global batch
  double grad_norm = 0;  // the global gradient norm before clipping
  double seconds = 0;    // wall time of the step on this rank
  double bubble = 0;     // idle over (ranks x step time)
  double rss_mb = 0;     // this rank's resident memory after the step
  StepReduce reduced;    // the all-reduced numbers (costs, busy time, compile counts)
};

class StepRunner {
 public:
  // Collective over `world`: exchanges boundary descriptions with remote neighbours, makes
  // the gradient sync groups, the optimizer and the executor, which takes over the plan's
  // local stages. `plan` must outlive the runner.
  StepRunner(const Config& config, JobPlan& plan, Communicator& world);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Step `step` (0-based). Collective; throws CommError when a peer does not answer.
  StepResult run(int64_t step);

 private:
  const Config& config_;
  JobPlan& plan_;
  Communicator& world_;
  std::unique_ptr<GradientSync> sync_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<SampleOrder> order_;
};

}  // namespace ppstage
