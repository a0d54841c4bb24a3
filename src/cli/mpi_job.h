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

// What a command that runs on every rank of an MPI job starts from: its command line, the
// options it declares, and what it checks once they are parsed.
struct MpiCommandStart {
  int argc = 0;
  const char* const* argv = nullptr;
  boost::program_options::options_description* options = nullptr;  // must be set
  std::string usage;
  std::function<void()> validate = [] {};  // after parsing; throws ppstage::Error
  // Asked after parsing: whether rank 0 keeps notes off stdout (a --json flag).
  std::function<bool()> quiet = [] { return false; };
};

// The start of a command that runs on every rank of an MPI job (an MpiSession must be
// alive): parses the command line (rank 0 prints --help; `given` gets the options the user
// set, as parseOptions says), runs `validate`, makes the world communicator with
// --comm.timeout_s (`comm`), and agrees on any parse or validation error, so that rank 0
// reports it once and every rank leaves (JobError). Returns nullptr when --help was asked
// for.
std::unique_ptr<Communicator> startMpiCommand(const MpiCommandStart& start, const CommConfig& comm,
                                              std::set<std::string>* given = nullptr);

// startMpiCommand for a command that trains (train, compare-compile): before `validate`,
// the layout the chosen schedule needs is filled in where the user left it
// (defaultScheduleLayout), and rank 0 says so on stdout unless `quiet`. Validates `config`
// as a whole before `validate`.
std::unique_ptr<Communicator> startTrainingCommand(const MpiCommandStart& start, Config& config);

}  // namespace ppstage::cli
