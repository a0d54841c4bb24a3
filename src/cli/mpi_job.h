// The start every command that runs on all ranks of an MPI job shares (train,
// compare-compile). Its work then runs through runCommand (run_command.h) while MPI is up.
#pragma once

#include <boost/program_options/options_description.hpp>

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "ppstage/comm/communicator.h"
#include "ppstage/config/config.h"

namespace ppstage::cli {

// The communicator options [comm] asks for: --comm.timeout_s as the timeout (0 or less
// keeps CommOptions' default).
CommOptions commOptionsOf(const CommConfig& comm);

// The start of a command that runs on every rank of an MPI job (an MpiSession must be
// alive): parses argv into `options` (rank 0 prints --help; `given` gets the options the
// user set, as parseOptions says), runs `validate`, makes the
// world communicator with --comm.timeout_s, and agrees on any parse or validation error,
// so that rank 0 reports it once and every rank leaves (JobError). Returns nullptr when
// --help was asked for.
std::unique_ptr<Communicator> startMpiCommand(int argc, const char* const* argv,
                                              boost::program_options::options_description& options,
                                              const std::string& usage, const CommConfig& comm,
                                              const std::function<void()>& validate,
                                              std::set<std::string>* given = nullptr);

// startMpiCommand for a command that trains (train, compare-compile): before `validate`,
// the layout the chosen schedule needs is filled in where the user left it
// (defaultScheduleLayout), and rank 0 says so on stdout unless `quiet` (asked after
// parsing: a --json flag). Validates `config` as a whole before `validate`.
std::unique_ptr<Communicator> startTrainingCommand(
    int argc, const char* const* argv, boost::program_options::options_description& options,
    const std::string& usage, Config& config, const std::function<void()>& validate,
    const std::function<bool()>& quiet);

}  // namespace ppstage::cli
