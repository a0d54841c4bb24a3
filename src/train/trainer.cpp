// See include/ppstage/train/trainer.h. The three phases live beside it: job_plan.cpp
// (plan the job), step_runner.cpp (run one step), run_summary.cpp (metrics and the
// closing lines).
#include "ppstage/train/trainer.h"

#include <iomanip>
#include <ostream>

#include "ppstage/comm/communicator.h"
#include "ppstage/split/plan_report.h"
#include "ppstage/train/job_plan.h"
#include "run_summary.h"
#include "step_runner.h"

namespace ppstage {
namespace {

void printConfiguration(std::ostream& log, const Config& c, const JobPlan& plan) {
  const Topology& t = plan.topology;
  log << "ppstage train: " << t.worldSize() << " rank" << (t.worldSize() > 1 ? "s" : "") << " = pp "
      << t.ppSize() << " x dp " << t.dpSize() << ", " << t.numStages() << " stage"
      << (t.numStages() > 1 ? "s" : "") << " (" << t.stagesPerRank() << " per rank, "
      << toString(t.placement()) << " placement), " << plan.threads << " thread"
      << (plan.threads > 1 ? "s" : "") << " per rank\n"
      << "  model     " << c.model.name << " (layers " << c.model.layers << ", d_model "
      << c.model.d_model << ", seq_len " << c.model.seq_len << ", vocab " << c.model.vocab_size
      << ", tied " << (c.model.tie_embeddings ? "yes" : "no") << ")\n"
      << "  schedule  " << plan.schedule.name << ", " << plan.batch.microbatches
      << " micro-batches of " << plan.batch.microbatch_size << " (batch " << c.train.batch_size
      << "), simulated bubble " << std::fixed << std::setprecision(3)
      << plan.schedule.simulation.bubble_fraction << "\n"
      << std::defaultfloat << std::setprecision(6) << "  compile   " << toString(c.compile.mode)
      << "\n"
      << "  train     " << c.train.steps << " steps, " << toString(c.train.optimizer) << " lr "
      << c.train.lr << " weight_decay " << c.train.weight_decay << ", grad_clip "
      << c.train.grad_clip << ", loss " << toString(plan.loss) << ", seed " << c.train.seed << "\n"
      << "  data      " << (plan.data ? plan.data->describe() : "?") << "\n\n";
}

// "step    3/50  loss 4.1234  time 0.031 s  tokens/s 16516  bubble 0.301  grad_norm 1.234",
// with the compile counts so far (over all ranks) when compiling.
void printStep(std::ostream& log, const Config& c, int64_t step, const StepResult& r,
               int64_t tokens_per_step) {
  log << "step " << std::setw(4) << step + 1 << "/" << c.train.steps << "  loss " << std::fixed
      << std::setprecision(4) << r.loss << "  time " << std::setprecision(3) << r.seconds
      << " s  tokens/s " << std::setprecision(0) << static_cast<double>(tokens_per_step) / r.seconds
      << "  bubble " << std::setprecision(3) << r.bubble << "  grad_norm " << std::setprecision(3)
      << r.grad_norm;
  if (c.compile.mode != CompileMode::kNone) {
    log << "  graphs " << std::setprecision(0) << r.reduced.graphs_compiled << "  respec "
        << r.reduced.respecializations;
  }
  log << std::defaultfloat << std::setprecision(6) << std::endl;
}

bool logsStep(const OutputConfig& output, int64_t step, int64_t steps) {
  return output.log_every > 0 &&
         ((step + 1) % output.log_every == 0 || step + 1 == steps || step == 0);
}

}  // namespace

RunMetrics train(const Config& config, Communicator& world, std::ostream& log) {
  const bool leader = world.rank() == 0;
  JobPlan plan = planJob(config, world);
  if (leader) {
    printConfiguration(log, config, plan);
    printPlanTable(log, plan.split);
    log << std::endl;
  }
  // Collectives from here on; a failure ends the job (the CLI aborts every rank).
  StepRunner runner(config, plan, world);
  RunRecord record;
  for (int64_t step = 0; step < config.train.steps; ++step) {
    const StepResult result = runner.run(step);
    record.add(step, config.train.steps, result);
    if (leader && logsStep(config.output, step, config.train.steps)) {
      printStep(log, config, step, result, plan.tokens_per_step);
    }
  }
  return summarizeRun(config, plan, record, world, log);
}

}  // namespace ppstage
