// The planner inside a run (plan/planner.h), on the cost profile of the run's own capture
// (measure/unit_costs.h: measured on every rank, or read from --plan.costs):
//   --pipeline.auto           `ppstage train` takes the plan's layout, schedule,
//                             micro-batches and cut (planAutomatically);
//   --pipeline.balance time   `ppstage train` and `ppstage split` keep the job's layout,
//                             schedule and micro-batches and take the planner's cut of
//                             them (cutByTime, plan/planner.h cutFor).
// Either way the choice is written into the configuration (split points and the rest), so
// the split that follows cuts where the plan says and measures nothing itself.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/core/cpu_layout.h"
#include "ppstage/plan/planner.h"
#include "ppstage/train/captured_run.h"

namespace ppstage {

class Communicator;

// The cost profile of `config`'s model for a job of `ranks` ranks, measured on every rank
// of `world` (measure/unit_costs.h, measureCostProfileOnRanks; null: this process alone),
// each rank on the compute threads such a job gives it (computeThreads). With --train.tp
// T over a `world`, each unit is measured sharded, in groups of T ranks as the run makes
// them; alone, whole (CostProfile::tp says which). `run`: this rank's capture of the
// model; null: captured here (captureRun). Collective.
CostProfile measuredProfile(const Config& config, const CapturedRun* run, int ranks,
                            Communicator* world);

// The CPUs of a job of `world` ranks as a plan sees them (core/cpu_layout.h, Note [Ranks
// that share cores]): every rank's machine, each rank computing with the threads the run
// gives it (computeThreads). Empty outside an MPI job of `world` ranks and where the ranks
// compute on GPUs (--train.device), whose CPU cores the plan need not share out.
CpuLayout jobCpuLayout(const Config& config, int world);

// Collective over `world`. Sets in `config` what the plan chose (plan_config.h,
// applyCandidate), and rank 0 writes to `log` what it chose and why. Every rank throws
// the same JobError (comm/agreement.h) for a plan that cannot be made: --plan.ranks other
// than the job's, a --train.tp that does not divide them, a cost file of another batch or
// tp, nothing that fits --plan.memory_mb. The plan keeps --train.tp and lays out pp x dp
// of the tensor-parallel groups.
void planAutomatically(Config& config, const CapturedRun& run, Communicator& world,
                       std::ostream& log);

// What --pipeline.balance time chose.
struct TimeCut {
  PlanCandidate chosen;      // the job's layout with the cut chosen, and its prediction
  double params_step_s = 0;  // predicted for --pipeline.balance params' cut; 0: refused
  std::vector<std::string> split_points;
  std::string costs;     // where the costs come from ("measured in compile mode none over 2 ranks")
  double measure_s = 0;  // measuring (or reading) the costs
};

// --pipeline.balance time for a job of `ranks` ranks laid out as `config` says: the cut
// cutFor makes of the job's own layout, schedule and micro-batches (the params cut where
// that predicts a shorter step), written into config.pipeline.split_points. Collective
// over `world`; null: this process alone (`ppstage split`). Throws the same JobError on
// every rank (ppstage::Error without `world`) for a layout the batch or the schedule
// refuses, a unit boundary that cannot be cut to measure, or a cost file of another model.
// Empty for a job of one stage: there is nothing to cut, and nothing is measured.
std::optional<TimeCut> cutByTime(Config& config, const CapturedRun& run, int ranks,
                                 Communicator* world);

// One line for logs: the cut, its predicted step against the params cut's, and the costs.
std::string timeCutText(const TimeCut& cut);

}  // namespace ppstage
