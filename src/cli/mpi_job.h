// How a command ends on an error while MPI is up.
#pragma once

#include <functional>

namespace ppstage::cli {

// Runs `body` and returns its exit code. Call it while an MpiSession is alive: an error
// thrown by `body` ends the job right there (failJob: one line, then MPI_Abort of every
// rank, exit code 2 for ppstage::Error, 1 otherwise), instead of unwinding into
// MPI_Finalize while other ranks still wait on this one. A JobError (every rank has it,
// comm/agreement.h) passes through: each rank leaves MPI normally.
int runMpiJob(const std::function<int()>& body);

}  // namespace ppstage::cli
