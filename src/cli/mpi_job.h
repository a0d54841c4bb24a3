// How a command ends on an error while MPI is up.
#pragma once

#include <boost/program_options/options_description.hpp>

#include <functional>
#include <memory>
#include <string>

#include "ppstage/comm/communicator.h"
#include "ppstage/config/config.h"

namespace ppstage::cli {

// The start of a command that runs on every rank of an MPI job (an MpiSession must be
// alive): parses argv into `options` (rank 0 prints --help), runs `validate`, makes the
// world communicator with --comm.timeout_s, and agrees on any parse or validation error,
// so that rank 0 reports it once and every rank leaves (JobError). Returns nullptr when
// --help was asked for.
std::unique_ptr<Communicator> startMpiCommand(int argc, const char* const* argv,
                                              boost::program_options::options_description& options,
                                              const std::string& usage, const CommConfig& comm,
                                              const std::function<void()>& validate);

// Runs `body` and returns its exit code. Call it while an MpiSession is alive: an error
// thrown by `body` ends the job right there (failJob: one line, then MPI_Abort of every
// rank, exit code 2 for ppstage::Error, 1 otherwise), instead of unwinding into
// MPI_Finalize while other ranks still wait on this one. A JobError (every rank has it,
// comm/agreement.h) passes through: each rank leaves MPI normally.
int runMpiJob(const std::function<int()>& body);

}  // namespace ppstage::cli
