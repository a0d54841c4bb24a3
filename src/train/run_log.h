// The lines `ppstage train` prints while it runs (rank 0): the job's configuration before
// the first step and one line per logged step. The closing lines are run_summary.h's.
#pragma once

#include <cstdint>
#include <iosfwd>

namespace ppstage {

struct Config;
class JobSetup;
struct JobLayout;
struct StepResult;

// "ppstage train: 2 ranks = pp 2 x dp 1, ..." and one line each for the model, schedule,
// compile mode, training, data, precision, and where they apply eval, lengths and tensor
// parallelism.
void printConfiguration(std::ostream& log, const Config& c, const JobSetup& setup);

// "step    3/50  loss 4.1234  lr 0.003  time 0.031 s  tokens/s 16516  bubble 0.301
// grad_norm 1.234" (accuracy after the loss when classifying; samples/s for inputs that are
// not token ids), with the compile counts so far (over all ranks) when compiling.
void printStep(std::ostream& log, const Config& c, const JobLayout& layout, int64_t step,
               const StepResult& r);

}  // namespace ppstage
