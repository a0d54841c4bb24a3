// What the training loop decides after each step, apart from running it: whether the step
// gets a log line, and how many non-finite steps in a row --train.nonfinite skip lets pass.
#pragma once

#include <cstdint>

#include "ppstage/config/config.h"

namespace ppstage {

// Whether step `step` (0-based) of a run going from `first_step` (0, or the step a resumed
// checkpoint ends at) to `steps` prints its line: the run's first step, every
// --output.log_every-th step and the last. Never with log_every 0.
bool logsStep(const OutputConfig& output, int64_t step, int64_t first_step, int64_t steps);

// --train.max_skipped: the steps in a row whose update was dropped for a non-finite loss or
// gradient. A finite step ends the row.
class SkippedSteps {
 public:
  explicit SkippedSteps(int64_t max_in_a_row) : max_in_a_row_(max_in_a_row) {}

  // Counts a dropped update; false when it is the max_in_a_row-th in a row (the run stops).
  bool skip() {
    ++total_;
    return ++in_a_row_ < max_in_a_row_;
  }
  void finite() { in_a_row_ = 0; }

  int64_t inARow() const { return in_a_row_; }
  int64_t total() const { return total_; }

 private:
  int64_t max_in_a_row_;
  int64_t in_a_row_ = 0;
  int64_t total_ = 0;
};

}  // namespace ppstage
