// train: `ppstage train` on one rank — the whole data flow of DESIGN.md for a run, in three
// phases:
//   plan       layout (pp x dp x tp) -> schedule -> split -> loss and data -> compile, agreed by
//              every rank before any collective (job_setup.h)
//   steps      per step: micro-batches -> Executor -> gradient sync -> one world all-reduce
//              -> clipping -> optimizer (src/train/step_runner.h)
//   summarize  metrics, parameter files and the closing lines (src/train/run_summary.h)
#pragma once

#include <iosfwd>

#include "ppstage/config/config.h"
#include "ppstage/observe/metrics.h"

namespace ppstage {

class Communicator;

// A job's communicators. `control` carries the CPU messages: boundary descriptions,
// agreement, the step's figures, failure reports, clocks, checkpoints. `data` carries the
// pipeline's activations and gradients; where it matches in posting order (NCCL) they go
// over a channel per route (train/pipeline_messages.h). Both have the same ranks; one
// communicator may be both.
struct JobCommunicators {
  Communicator& control;
  Communicator& data;

  // What the device tensors' collectives split their groups from (the data-parallel and
  // tied-weight gradient sums, the tensor-parallel all-reduces): `data` where it matches
  // in posting order (NCCL: the tensors stay on the GPU), else `control`.
  Communicator& collectives() const;
};

// Trains on this rank of `world` (every rank of the job calls it with the same config).
// Rank 0 prints the effective configuration, the split plan and the step lines to `log`.
// Planning errors end every rank together (JobError, see comm/agreement.h); errors during
// the steps throw (the CLI then ends the job). Returns the run's metrics, the same on every
// rank but for the data's description (where the data set is open).
// With `live_progress` (the CLI passes stdoutIsTerminal(), observe/progress_line.h), rank 0
// also redraws one live progress line on `log` after every step.
RunMetrics train(const Config& config, Communicator& world, std::ostream& log,
                 bool live_progress = false);
// The same with the pipeline's messages on `comms.data`; `comms.control` is the world.
RunMetrics train(const Config& config, const JobCommunicators& comms, std::ostream& log,
                 bool live_progress = false);

}  // namespace ppstage
