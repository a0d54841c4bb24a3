// --pipeline.auto: `ppstage train` plans its own configuration before anything else
// (plan/planner.h): every rank measures the links, rank 0 the model's units (the others
// wait, so its timings are its own, as --pipeline.balance time does), every rank plans
// from rank 0's profile (the same plan everywhere, no further agreement needed) and takes
// the winner's layout, schedule, micro-batches and cut into its configuration.
#pragma once

#include <iosfwd>

#include "ppstage/config/config.h"

namespace ppstage {

class Communicator;

// Collective over `world`. Sets in `config` what the plan chose (plan_config.h,
// applyCandidate), and rank 0 writes to `log` what it chose and why. Every rank throws
// the same JobError (comm/agreement.h) for a plan that cannot be made: --plan.ranks other
// than the job's, tensor parallelism, a cost file of another batch, nothing that fits
// --plan.memory_mb.
void planAutomatically(Config& config, Communicator& world, std::ostream& log);

}  // namespace ppstage
