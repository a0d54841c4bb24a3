// See run_command.h.
#include "run_command.h"

#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/failure_channel.h"
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

// Ends an MPI job that failed on this rank, or (`peer_failed`, rank 0 only) on a rank that
// reported it: Note [Failure reports].
[[noreturn]] void endFailedJob(const Failure& failure, bool peer_failed) {
  const int rank = mpiWorldRank();
  const FailureReport mine = failureReportNow(rank, failure.exit_code, failure.message);
  if (!peer_failed) printErrorLine(rankPrefixed(rank, failure.message));
  if (rank != 0) {
    sendFailureReport(mine);
    std::this_thread::sleep_for(kFailedRankWait);  // rank 0 ends the job meanwhile
    MPI_Abort(MPI_COMM_WORLD, failure.exit_code);
  }
  std::vector<FailureReport> reports = collectFailureReports(kReportGrace);
  if (reports.empty() && peer_failed) printErrorLine(failure.message);  // a report lost
  if (!peer_failed) reports.push_back(mine);
  int exit_code = failure.exit_code;
  if (reports.size() > 1 || (reports.size() == 1 && reports[0].rank != 0)) {
    printErrorLine(failureSummary(reports, mpiWorldSize()));
    exit_code = firstFailure(reports).exit_code;
  }
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return
}

}  // namespace

int runCommand(const std::function<int()>& body) {
  try {
    return body();
  } catch (const JobError& e) {
    if (e.reportsHere()) printErrorLine(e.what());
    if (!e.summary().empty()) printErrorLine(e.summary());
    return e.exitCode();
  } catch (const PeerFailedError& e) {
    if (mpiWorldRank() == 0) endFailedJob({e.what(), 1}, true);
    printErrorLine(e.what());
    return 1;
  } catch (...) {
    const Failure failure = failureOf(std::current_exception());
    if (mpiWorldRank() >= 0) endFailedJob(failure, false);
    printErrorLine(failure.message);
    return failure.exit_code;
  }
}

}  // namespace ppstage::cli
