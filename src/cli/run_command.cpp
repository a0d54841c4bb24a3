// See run_command.h.
#include "run_command.h"

#include <mpi.h>

#include <iostream>
#include <string>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/mpi_session.h"

namespace ppstage::cli {

int runCommand(const std::function<int()>& body) {
  try {
    return body();
  } catch (const JobError& e) {
    if (e.reportsHere()) std::cerr << "ppstage: error: " << e.what() << std::endl;
    return e.exitCode();
  } catch (...) {
    const Failure failure = failureOf(std::current_exception());
    std::string line = failure.message;
    for (char& c : line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    const int rank = mpiWorldRank();
    std::cerr << "ppstage: error: " << (rank >= 0 ? "[rank " + std::to_string(rank) + "] " : "")
              << line << std::endl;
    if (rank >= 0) MPI_Abort(MPI_COMM_WORLD, failure.exit_code);
    return failure.exit_code;
  }
}

}  // namespace ppstage::cli
