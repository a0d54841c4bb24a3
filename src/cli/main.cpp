// ppstage's entry point: picks the subcommand and is the one place that decides the
// process's fate. Library code throws; here every error becomes one line
// `ppstage: error: ...` on stderr and a non-zero exit (2 for bad input, 1 for anything
// else), and under MPI the end of every rank (failJob).
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>

#include "commands.h"
#include "ppstage/comm/agreement.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/core/error.h"

namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitFailure = 1;

void printUsage(std::ostream& out) {
  out << "usage: ppstage <command> [--config FILE] [--section.key value ...]\n\n"
         "ppstage trains a TorchScript model split into pipeline stages.\n\ncommands:\n";
  size_t width = 0;
  for (const auto& command : ppstage::cli::kCommands)
    width = std::max(width, std::strlen(command.name));
  for (const auto& command : ppstage::cli::kCommands) {
    out << "  " << command.name << std::string(width - std::strlen(command.name) + 2, ' ')
        << command.summary << "\n";
  }
  out << "\n`ppstage <command> --help` lists a command's options.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    printUsage(std::cerr);
    return kExitBadInput;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    printUsage(std::cout);
    return 0;
  }
  const ppstage::cli::Command* command = nullptr;
  std::string known;
  for (const auto& candidate : ppstage::cli::kCommands) {
    if (name == candidate.name) command = &candidate;
    known += (known.empty() ? "" : ", ") + std::string(candidate.name);
  }
  if (command == nullptr) {
    ppstage::failJob("unknown command '" + name + "' (commands: " + known + ")", kExitBadInput);
  }
  try {
    return command->run(argc - 1, argv + 1);
  } catch (const ppstage::JobError& e) {
    // Every rank of the job has this error and has left MPI: one of them reports it.
    if (e.reportsHere()) std::cerr << "ppstage: error: " << e.what() << std::endl;
    return e.exitCode();
  } catch (const ppstage::Error& e) {
    ppstage::failJob(e.what(), kExitBadInput);
  } catch (const c10::Error& e) {
    ppstage::failJob(e.what_without_backtrace(), kExitFailure);
  } catch (const std::exception& e) {
    ppstage::failJob(e.what(), kExitFailure);
  }
}
