// ppstage's entry point: picks the subcommand and runs it through runCommand
// (run_command.h), which turns any error into one line `ppstage: error: ...` and the exit
// code (2 for bad input, 1 for anything else), and under MPI ends every rank.
#include "commands.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ppstage/core/allocator.h"
#include "ppstage/core/error.h"
#include "ppstage/core/software_stack.h"
#include "ppstage/core/text.h"
#include "run_command.h"

namespace {

constexpr int kExitBadInput = 2;

void printUsage(std::ostream& out) {
  out << "usage: ppstage <command> [--config FILE] [--section.key value ...]\n\n"
         "ppstage trains a TorchScript model split into pipeline stages.\n\ncommands:\n";
  size_t width = 0;
  for (const auto& command : ppstage::cli::kCommands) {
    width = std::max(width, std::strlen(command.name));
  }
  for (const auto& command : ppstage::cli::kCommands) {
    out << "  " << command.name << std::string(width - std::strlen(command.name) + 2, ' ')
        << command.summary << "\n";
  }
  out << "\n`ppstage <command> --help` lists a command's options; `ppstage --version` the\n"
         "LibTorch, CUDA, cuDNN and NCCL versions built against and loaded.\n";
}

// `ppstage --version`: this build and the libraries under it (core/software_stack.h).
void printVersion(std::ostream& out) {
  out << "ppstage " << PPSTAGE_VERSION << "\n" << ppstage::describe(ppstage::softwareStack());
}

// The command named `name`; throws ppstage::Error listing the commands otherwise.
const ppstage::cli::Command& findCommand(const std::string& name) {
  std::vector<std::string> known;
  for (const auto& command : ppstage::cli::kCommands) {
    if (name == command.name) return command;
    known.push_back(command.name);
  }
  const std::string closest = ppstage::closestName(name, known);
  PPSTAGE_FAIL("unknown command '", name, "'",
               closest.empty() ? "" : "; did you mean " + closest + "?",
               " (commands: ", ppstage::joinText(known, ", "), ")");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    printUsage(std::cerr);
    return kExitBadInput;
  }
  // Every command that runs the model keeps its freed activations for the next step.
  ppstage::keepFreedMemoryForReuse();
  // A write past the file-size limit (RLIMIT_FSIZE) fails with EFBIG, which the writer
  // reports (a checkpoint save exits 4), instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    printUsage(std::cout);
    return 0;
  }
  if (name == "--version") {
    return ppstage::cli::runCommand([] {
      printVersion(std::cout);
      return 0;
    });
  }
  return ppstage::cli::runCommand([&] { return findCommand(name).run(argc - 1, argv + 1); });
}
