// train: `ppstage train` on one rank — the whole data flow of DESIGN.md for a run:
// layout (pp x dp) -> schedule -> split -> compile -> data -> Executor steps with gradient
// sync, clipping and the optimizer -> step log and metrics.
#pragma once

#include <iosfwd>

#include "ppstage/config/config.h"
#include "ppstage/observe/metrics.h"

namespace ppstage {

class Communicator;

// Trains on this rank of `world` (every rank of the job calls it with the same config).
// Rank 0 prints the effective configuration, the split plan and the step lines to `log`.
// Setup errors end every rank together (JobError, see comm/agreement.h); errors during
// the steps throw (the CLI then ends the job). Returns the run's metrics (complete on rank 0;
// other ranks fill in what they know).
RunMetrics train(const Config& config, Communicator& world, std::ostream& log);

}  // namespace ppstage
