// See run_command.h.
#include "run_command.h"

#include <mpi.h>

#include <iostream>
#include <string>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/core/text.h"

namespace ppstage::cli {
namespace {

// "ppstage: error: <message>" in one write: std::cerr is unbuffered, and under mpirun a line
// written in pieces can be split by the other stream's output (the run's last stdout lines).
// One line: line breaks become spaces, and bytes a terminal would not print as themselves
// (a binary config file's, a file name's escape sequence) are written as \xNN.
void printErrorLine(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const std::string line = "ppstage: error: " + printableText(message) + "\n";
  std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  std::cerr.flush();
}

}  // namespace

int runCommand(const std::function<int()>& body) {
  try {
    return body();
  } catch (const JobError& e) {
    if (e.reportsHere()) printErrorLine(e.what());
    return e.exitCode();
  } catch (...) {
    const Failure failure = failureOf(std::current_exception());
    const int rank = mpiWorldRank();
    printErrorLine((rank >= 0 ? "[rank " + std::to_string(rank) + "] " : "") + failure.message);
    if (rank >= 0) MPI_Abort(MPI_COMM_WORLD, failure.exit_code);
    return failure.exit_code;
  }
}

}  // namespace ppstage::cli
