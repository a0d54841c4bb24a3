// SIGTERM and SIGINT during `ppstage train`: the first asks the run to stop, the second ends
// the process at once.
//
// The handler only records the signal. Each step, every rank puts what it saw into the
// per-step all-reduce (StepReduce), so all ranks learn of a signal sent to any one of them
// in the same step (mpirun, sent SIGTERM, signals every rank itself after a delay: see
// docs/cli.md); they finish that step, save a checkpoint, and leave together. A second
// signal, at least a second after the first (a copy of the same stop arriving twice is
// ignored), _exits the rank with 128 + the signal, as an unhandled one would.
#pragma once

#include <string>
#include <vector>

namespace ppstage {

class StopSignal {
 public:
  // Installs the handlers for SIGTERM and SIGINT; the destructor puts the previous ones back.
  // One at a time per process.
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The first signal received since installation (SIGTERM or SIGINT), 0 for none; SIGINT
  // when one follows within the second (see jobStopSignal).
  static int received();
};

// The job's stop from what each rank received (0: nothing): SIGINT when any rank saw one,
// since Ctrl-C reaches every rank of mpirun's process group and mpirun passes it on as
// SIGTERM, so some ranks may see that first; else the signal any rank saw; else 0.
int jobStopSignal(const std::vector<double>& per_rank);

// "SIGTERM", "SIGINT", or "a signal".
const char* signalName(int signal);

// What the stop line adds about `signal`: under Open MPI's mpirun, whose ranks sit in
// process groups of their own, a Ctrl-C reaches only mpirun, which passes it on to the ranks
// as SIGTERM (as it does a SIGTERM), so the ranks cannot tell the two apart; "" elsewhere.
std::string signalNote(int signal);

}  // namespace ppstage
