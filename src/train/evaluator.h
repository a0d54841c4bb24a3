// Held-out evaluation during training (--eval.every, --eval.batches, --data.val_path): a
// forward-only pass of the validation set's first batches through the pipeline
// (schedule/forward_only.h), over the eval-mode stages of JobSetup::eval(), whose
// parameters are the training ones. It records no autograd graph, touches no gradient,
// optimizer state, random stream or sample order: a run with evaluation trains exactly as
// one without.
#pragma once

#include <cstdint>
#include <memory>

#include "ppstage/config/config.h"
#include "ppstage/train/trainer.h"

namespace ppstage {

class Communicator;
class Executor;
struct EvalModel;
struct JobLayout;

// One evaluation, over the whole job.
struct EvalResult {
  int64_t step = 0;     // after this many training steps
  double loss = 0;      // the mean over every counted target of its batches
  double accuracy = 0;  // classification: the share of labels predicted right; else NaN
  double seconds = 0;   // its wall time on this rank
};

class Evaluator {
 public:
  // Makes the forward-only executor over `eval`'s stages (taken from it), posting on
  // `comms.data` (train/pipeline_messages.h: collective where that needs channels).
  // `config`, `layout`, `eval` and the communicators `comms` names must outlive it.
  Evaluator(const Config& config, const JobLayout& layout, EvalModel& eval,
            const JobCommunicators& comms);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Whether an evaluation is due after step `step` (0-based): every --eval.every steps and
  // after the last.
  bool dueAfter(int64_t step) const;

  // Evaluates after `steps` training steps. Collective over the world; throws CommError
  // when a peer does not answer.
  EvalResult run(int64_t steps);

 private:
  const Config& config_;
  const JobLayout& layout_;
  const EvalModel& eval_;
  Communicator& world_;                     // JobCommunicators::control
  std::unique_ptr<Communicator> channels_;  // the executor's, where data needs them
  std::unique_ptr<Executor> executor_;
};

}  // namespace ppstage
