// The live progress line of `ppstage train` on a terminal: one line redrawn in place,
//   step 120/1000  loss 3.1234  tokens/s 12345  elapsed 0:12  eta 1:30
// while the step lines (--output.log_every) and everything else print above it. Off a
// terminal (a log file, a pipe, CI) only the plain lines are printed.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace ppstage {

// Whether this process's stdout reaches a terminal. Under OpenMPI's mpirun a rank's stdout
// is always a pseudo-terminal of mpirun's, so what counts there is mpirun's own stdout.
bool stdoutIsTerminal();

class ProgressLine {
 public:
  // Steps [first_step, steps) of a run. `unit`: what a step's tokens count, "tokens" or
  // "samples".
  ProgressLine(std::ostream& out, int64_t first_step, int64_t steps, std::string unit = "tokens");

  // After step `step` (0-based) took `seconds` for `tokens` tokens (or samples; documents:
  // their own, padding left out), with `loss`: redraws the line, at most ten times a second
  // (and always for the last step).
  void update(int64_t step, double loss, double seconds, int64_t tokens);
  // Erases the line, so that a plain line can be printed in its place; the next update
  // draws it again.
  void clear();

 private:
  using Clock = std::chrono::steady_clock;
  std::ostream& out_;
  int64_t first_step_, steps_;
  std::string unit_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point drawn_at_{};
  bool drawn_ = false;
};

}  // namespace ppstage
