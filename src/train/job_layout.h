// The job's layout on this rank: the topology, the threads, the micro-batches and the schedule,
// with the rank's output paths proven writable first.
// Internal to train/: job_setup.cpp assembles the setup from these.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ppstage/train/job_setup.h"

namespace ppstage {

// The layout, the micro-batches and the schedule of this rank of `world`. On the way it
// proves this rank's output paths writable (checkOutputPaths) and sets this process's
// compute threads.
JobLayout layoutOf(const Config& config, int rank, int world);

}  // namespace ppstage
