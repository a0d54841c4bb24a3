// Errors every rank reports together. A job's setup (options, schedule, split, data) runs
// on every rank; some failures show on one rank only (a data file only the first stage's
// rank opens). runAgreed() lets every rank learn of any rank's failure, so all of them stop
// at once with the same message instead of waiting on a rank that has left.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "ppstage/core/error.h"

namespace ppstage {

class Communicator;

// Thrown on every rank when some rank's setup failed. The CLI prints what() where
// reportsHere(), then summary() where it is not empty, and every rank exits with exitCode()
// after finalizing MPI: no rank is killed, none hangs.
class JobError : public Error {
 public:
  JobError(const std::string& message, int exit_code, bool reports_here)
      : Error(message), exit_code_(exit_code), reports_here_(reports_here) {}
  int exitCode() const { return exit_code_; }
  // True on the ranks that print the message: rank 0 when every failed rank failed alike,
  // else each failed rank.
  bool reportsHere() const { return reports_here_; }
  // Rank 0's line after the ranks' own when they failed differently (failureSummary).
  const std::string& summary() const { return summary_; }
  void setSummary(std::string summary) { summary_ = std::move(summary); }

 private:
  int exit_code_;
  bool reports_here_;
  std::string summary_;
};

// What a failure means for a ppstage process: its message and exit code, 2 for
// ppstage::Error (bad input), 1 for anything else (a c10::Error without its C++ backtrace).
struct Failure {
  std::string message;
  int exit_code = 1;
};
Failure failureOf(const std::exception_ptr& error);

// Runs `fn` on this rank, then agrees with every rank of `comm` (collective): when `fn`
// threw on any rank, throws JobError on all of them with the lowest failing rank's exit
// code (2 for ppstage::Error, 1 otherwise). When every failed rank has the same message
// (first line), rank 0 reports it ("[rank r] ..." when the lowest failed rank r is not 0);
// else each failed rank reports its own and rank 0 adds the summary (failureSummary).
void runAgreed(Communicator& comm, const std::function<void()>& fn);

// Every rank's `mine`, in rank order, on every rank (collective: two all-reduces).
std::vector<std::string> allGatherStrings(Communicator& comm, const std::string& mine);

// Every rank's `mine`, in rank order, on rank `root`; empty elsewhere. Collective, point to
// point: each rank sends its bytes once, as bytes, so large texts such as a trace are
// cheap. Blocks; throws CommError when a peer does not answer within the timeout.
std::vector<std::string> gatherStrings(Communicator& comm, const std::string& mine, int root);

}  // namespace ppstage
