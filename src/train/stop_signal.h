// SIGTERM and SIGINT during `ppstage train`: the first asks the run to stop, the second ends
// the process at once.
//
// The handler only records the signal. Each step, every rank puts what it saw into the
// per-step all-reduce (StepReduce), so all ranks learn of a signal sent to any one of them
// (or to mpirun, which forwards it to all) in the same step; they finish that step, save a
// checkpoint, and leave together. A second signal, to a rank whose stop is already
// pending, _exits it with 128 + the signal, as an unhandled one would.
#pragma once

namespace ppstage {

class StopSignal {
 public:
  // Installs the handlers for SIGTERM and SIGINT; the destructor puts the previous ones back.
  // One at a time per process.
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The first signal received since installation (SIGTERM or SIGINT), 0 for none.
  static int received();
};

// "SIGTERM", "SIGINT", or "signal <n>".
const char* signalName(int signal);

}  // namespace ppstage
