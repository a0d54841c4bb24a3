// See include/ppstage/train/trainer.h. The three phases live beside it: job_setup.cpp
// (plan the job), step_runner.cpp (run one step), run_summary.cpp (metrics and the
// closing lines); what the run prints as it goes is run_log.cpp's.
#include "ppstage/train/trainer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <optional>
#include <ostream>

#include "checkpointer.h"
#include "evaluator.h"
#include "pipeline_messages.h"
#include "ppstage/checkpoint/checkpoint_dir.h"
#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/compute_threads.h"
#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/observe/live_metrics.h"
#include "ppstage/observe/progress_line.h"
#include "ppstage/split/plan_report.h"
#include "ppstage/train/auto_plan.h"
#include "ppstage/train/job_setup.h"
#include "ppstage/train/step_policy.h"
#include "ppstage/train/stop_signal.h"
#include "run_log.h"
#include "run_summary.h"
#include "step_runner.h"

namespace ppstage {
namespace {

// The steps of a run, from the first (0, or the resumed checkpoint's) to --train.steps:
// each step, its log line, the non-finite policy, periodic checkpoints, and a stop asked
// for by a signal. Ends the run through summarizeRun, whichever way it ends.
class TrainLoop {
 public:
  TrainLoop(const Config& config, JobSetup& setup, const JobCommunicators& comms, std::ostream& log,
            bool live_progress)
      : config_(config),
        setup_(setup),
        world_(comms.control),
        log_(log),
        leader_(world_.rank() == 0),
        runner_(config, setup.layout(), setup.model(), setup.data(), setup.takeLocalStages(),
                comms),
        checkpointer_(config, setup.layout(), setup.model(), world_),
        live_progress_(live_progress && leader_) {
    setup.releaseMasterValues();  // the runner's MasterWeights hold them now
    if (setup.eval() != nullptr) {
      evaluator_ = std::make_unique<Evaluator>(config, setup.layout(), *setup.eval(), comms);
    }
  }

  RunMetrics run() {
    if (config_.checkpoint.resume) resume();
    if (record_.first_step >= config_.train.steps) return nothingToDo();
    if (!config_.checkpoint.dir.empty()) noteSaveTime();
    if (leader_) live_ = openLiveMetrics(config_.output, !record_.resumed_from.empty());
    if (live_progress_) {
      const JobLayout& layout = setup_.layout();
      progress_.emplace(log_, record_.first_step, config_.train.steps,
                        layout.token_inputs ? "tokens" : "samples");
    }
    for (int64_t step = record_.first_step; step < config_.train.steps; ++step) {
      const StepResult result = runner_.run(step);
      if (result.abandoned) return stopDuring(step, result.stop_signal);
      record_.add(step - record_.first_step, config_.train.steps - record_.first_step, result);
      // A stopping step saves before it writes a line: once mpirun itself got the SIGTERM it
      // no longer reads the ranks' output, and a write that blocks must not cost the
      // checkpoint.
      const bool stopping = result.stop_signal != 0;
      if (!stopping) logStep(step, result);
      if (!result.finite) onNonfinite(step, result);
      if (result.finite) {
        last_finite_ = {step, result.loss};
        skipped_.finite();
      }
      if (checkpointDue(step, stopping)) save(step + 1);
      if (!stopping && evaluator_ && evaluator_->dueAfter(step)) evaluate(step + 1);
      if (stopping) {
        logStep(step, result);
        return stop(step, result.stop_signal);
      }
    }
    clearProgress();
    record_.transfers = runner_.measureTransfers();
    return finish();
  }

 private:
  // However the run ends: the metrics and closing lines, then the trace. Only a run that
  // went to its last step measures its messages first (comm_s): one stopped by a signal
  // or a failure has seconds left before it is killed, and spends them on its checkpoint.
  RunMetrics finish() {
    RunMetrics metrics = summarizeRun(config_, setup_.layout(), setup_.model(), runner_,
                                      setup_.data(), record_, world_, log_);
    if (runner_.tracing()) {
      const int64_t events = runner_.writeTrace();
      if (leader_) {
        log_ << "trace: " << config_.output.trace << " (" << events
             << " events on rank 0; open it in ui.perfetto.dev, or draw it with ppstage timeline "
                "--trace "
             << config_.output.trace << " --svg timeline.svg)" << std::endl;
      }
    }
    return metrics;
  }

  // The step's line (rank 0, every --output.log_every steps), its live records (every
  // step) and the live line.
  void logStep(int64_t step, const StepResult& result) {
    if (leader_ && logsStep(config_.output, step, record_.first_step, config_.train.steps)) {
      clearProgress();
      printStep(log_, config_, setup_.layout(), step, result);
    }
    if (!live_.empty()) {
      const LiveStep live{step + 1,
                          result.loss,
                          result.accuracy,
                          result.lr,
                          result.grad_norm,
                          result.seconds,
                          static_cast<double>(result.tokens) / result.seconds,
                          setup_.layout().token_inputs,
                          result.bubble,
                          result.epoch,
                          result.finite};
      for (const auto& sink : live_) sink->step(live);
    }
    if (progress_) progress_->update(step, result.loss, result.seconds, result.tokens);
  }

  // "eval step 100: loss 2.3100 accuracy 0.4200 (4 batches, 0.12 s)"; kept for the metrics.
  void evaluate(int64_t steps) {
    const EvalResult r = evaluator_->run(steps);
    record_.eval.push_back({steps, r.loss, r.accuracy, r.seconds});
    for (const auto& sink : live_) sink->eval({steps, r.loss, r.accuracy, r.seconds});
    if (!leader_) return;
    clearProgress();
    log_ << "eval step " << steps << ": loss " << std::fixed << std::setprecision(4) << r.loss;
    if (setup_.layout().classifies) log_ << " accuracy " << r.accuracy;
    log_ << " (" << setup_.eval()->batches << " batches, " << std::setprecision(2) << r.seconds
         << " s)" << std::defaultfloat << std::setprecision(6) << std::endl;
  }

  // Before any other line: the live line (on a terminal) is redrawn after it.
  void clearProgress() {
    if (progress_) progress_->clear();
  }

  void resume() {
    const auto start = std::chrono::steady_clock::now();
    const auto resumed = checkpointer_.resume(runner_, log_);
    record_.resume_s = secondsSince(start);
    if (!resumed) return;
    record_.resumed_from = resumed->dir;
    record_.first_step = resumed->manifest.step;
  }

  // Where a save would outlast the second Open MPI's mpirun leaves the ranks after a
  // Ctrl-C (Note [Abandoning a step]), rank 0 says so, with the option that gives more.
  // Collective: every rank's expected save time, the slowest counts.
  void noteSaveTime() {
    constexpr double kGraceS = 1.0;  // odls_base_sigkill_timeout's default
    at::Tensor seconds = at::zeros({world_.size()}, at::kDouble);
    try {
      seconds[world_.rank()] = checkpointer_.expectedSaveSeconds();
    } catch (const Error&) {
      // Unknown: the save itself will say what is wrong with the directory.
    }
    world_.allReduceSum({seconds});
    const double slowest = seconds.max().item<double>();
    if (!leader_ || slowest <= kGraceS) return;
    log_ << "checkpoint: a save is expected to take " << std::setprecision(2) << slowest
         << " s, longer than the second mpirun leaves the ranks after a Ctrl-C before it kills "
            "them (odls_base_sigkill_timeout, default 1 s); such a stop would lose the steps "
            "since the last checkpoint: give it more with mpirun --mca "
            "odls_base_sigkill_timeout "
         << static_cast<int>(std::ceil(slowest)) + 2 << std::setprecision(6) << std::endl;
  }

  RunMetrics nothingToDo() {
    if (leader_) {
      log_ << "nothing to train: " << record_.resumed_from << " already has " << record_.first_step
           << " steps (--train.steps " << config_.train.steps << ")" << std::endl;
    }
    RunMetrics metrics;
    metrics.resumed_from = record_.resumed_from;
    metrics.first_step = record_.first_step;
    return metrics;
  }

  bool checkpointDue(int64_t step, bool stopping) const {
    const CheckpointConfig& c = config_.checkpoint;
    if (c.dir.empty()) return false;
    return stopping || step + 1 == config_.train.steps ||
           (c.every > 0 && (step + 1) % c.every == 0);
  }

  // A failed save ends the run, keeping what it measured.
  void save(int64_t steps_done) {
    try {
      record_.checkpoints.push_back(checkpointer_.save(steps_done, runner_));
    } catch (const JobError&) {
      clearProgress();
      finish();
      throw;
    }
  }

  RunMetrics stop(int64_t step, int signal) {
    record_.stopped_by = signalName(signal);
    clearProgress();
    RunMetrics metrics = finish();
    const std::string stopped =
        detail::concat("stopped by ", record_.stopped_by, " after step ", step + 1);
    if (config_.checkpoint.dir.empty()) {
      throw JobError(stopped + "; nothing saved (no --checkpoint.dir)", Checkpointer::kExitNotSaved,
                     leader_);
    }
    if (leader_) {
      log_ << stopped << "; checkpoint " << record_.checkpoints.back().path << signalNote(signal)
           << std::endl;
    }
    return metrics;
  }

  // A step abandoned to stop (Note [Abandoning a step]): the state is the previous step's,
  // saved as the `step` steps done (where no checkpoint of them exists yet).
  RunMetrics stopDuring(int64_t step, int signal) {
    record_.stopped_by = signalName(signal);
    clearProgress();
    // The state of `step` steps is saved already where the run resumed from it, or where
    // --checkpoint.every saved it after the step before.
    const bool resumed_here = step == record_.first_step && !record_.resumed_from.empty();
    const std::string name = "/" + checkpointName(step);
    const std::string& last = record_.checkpoints.empty() ? name : record_.checkpoints.back().path;
    const bool saved = !record_.checkpoints.empty() && last.size() >= name.size() &&
                       last.compare(last.size() - name.size(), name.size(), name) == 0;
    if (!resumed_here && !saved) save(step);
    const std::string checkpoint =
        resumed_here ? record_.resumed_from : record_.checkpoints.back().path;
    RunMetrics metrics = step > record_.first_step ? finish() : RunMetrics{};
    if (leader_) {
      log_ << "stopped by " << record_.stopped_by << " during step " << step + 1
           << ", abandoned before its optimizer step; checkpoint " << checkpoint << " (" << step
           << (step == 1 ? " step" : " steps") << " done)" << signalNote(signal) << std::endl;
    }
    metrics.stopped_by = record_.stopped_by;
    return metrics;
  }

  // --train.nonfinite: stop here (exit 3), or drop the update and go on, up to
  // --train.max_skipped in a row.
  void onNonfinite(int64_t step, const StepResult& result) {
    clearProgress();
    std::string line = detail::concat("step ", step + 1, ": ", result.nonfinite, "; ");
    if (std::isfinite(result.loss)) {
      line += detail::concat("the step's loss is ", result.loss);
    } else if (last_finite_.first < 0) {
      line += "no finite loss before it";
    } else {
      line += detail::concat("last finite loss ", last_finite_.second, " (step ",
                             last_finite_.first + 1, ")");
    }
    if (config_.train.nonfinite == NonfinitePolicy::kSkip) {
      const bool goes_on = skipped_.skip();
      record_.skipped_steps = skipped_.total();
      if (goes_on) {
        if (leader_) log_ << line << "; update skipped (" << skipped_.inARow() << " in a row)\n";
        return;
      }
      line +=
          detail::concat("; ", skipped_.inARow(), " steps in a row skipped (--train.max_skipped)");
    }
    finish();
    throw JobError(line + "; stopped before the optimizer applied it", kExitNonfinite, leader_);
  }

  static constexpr int kExitNonfinite = 3;

  const Config& config_;
  JobSetup& setup_;
  Communicator& world_;
  std::ostream& log_;
  const bool leader_;
  StopSignal stop_signal_;  // installed for the steps
  StepRunner runner_;
  Checkpointer checkpointer_;
  RunRecord record_;
  const bool live_progress_;
  std::unique_ptr<Evaluator> evaluator_;                // null without --eval.every
  std::vector<std::unique_ptr<LiveMetricsSink>> live_;  // rank 0: --output.metrics_jsonl, ...
  std::optional<ProgressLine> progress_;                // rank 0 on a terminal
  std::pair<int64_t, double> last_finite_{-1, 0};       // step, loss
  SkippedSteps skipped_{config_.train.max_skipped};
};

}  // namespace

Communicator& JobCommunicators::collectives() const {
  return data.matchesInPostingOrder() ? data : control;
}

RunMetrics train(const Config& config, Communicator& world, std::ostream& log, bool live_progress) {
  return train(config, JobCommunicators{world, world}, log, live_progress);
}

RunMetrics train(const Config& given, const JobCommunicators& comms, std::ostream& log,
                 bool live_progress) {
  Communicator& world = comms.control;
  Config config = given;
  setComputeThreads(computeThreads(config.train, world.size()));
  std::optional<CapturedRun> run;  // the one capture of the training model on this rank
  runAgreed(world, [&] {
    resolveDevice(config.train.device, config.comm.backend, thisHost());  // before a capture
    run.emplace(captureRun(config));
  });
  std::optional<TimeCut> time_cut;
  if (config.pipeline.auto_plan) {
    planAutomatically(config, *run, world, log);
  } else if (balancesByTime(config.pipeline)) {
    time_cut = cutByTime(config, *run, world.size(), &world);
  }
  JobSetup setup = setUpJob(config, std::move(*run), world);
  if (time_cut) setup.setSplitMethod("time");
  if (world.rank() == 0) {
    if (time_cut) log << timeCutText(*time_cut) << "\n";
    printConfiguration(log, config, setup);
    printPlanTable(log, setup.model().split);
    log << std::endl;
  }
  // Collectives from here on; a failure ends the job (the CLI aborts every rank).
  // --comm.backend nccl: the pipeline's messages, the gradient sums and the tensor-parallel
  // all-reduces on NCCL; control stays on `world`.
  const std::unique_ptr<Communicator> nccl = ncclDataCommunicator(world, setup.layout().device);
  const JobCommunicators job{world, nccl ? *nccl : comms.data};
  if (&job.collectives() != &world) setup.attachTensorParallel(job.collectives());
  TrainLoop loop(config, setup, job, log, live_progress);
  return loop.run();
}

}  // namespace ppstage
