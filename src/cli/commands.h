// The subcommands of the `ppstage` executable. Each parses its own options, throws
// ppstage::Error on bad input and returns the process exit code otherwise.
#pragma once

namespace ppstage::cli {

// argv[0] is the subcommand's name.
using CommandMain = int (*)(int argc, const char* const* argv);

struct Command {
  const char* name;
  const char* summary;
  CommandMain run;
};

int splitMain(int argc, const char* const* argv);
int benchCommMain(int argc, const char* const* argv);
int scheduleMain(int argc, const char* const* argv);
int trainMain(int argc, const char* const* argv);
int compareRunsMain(int argc, const char* const* argv);
int compareCompileMain(int argc, const char* const* argv);
int exportMain(int argc, const char* const* argv);
int timelineMain(int argc, const char* const* argv);
int planMain(int argc, const char* const* argv);

// Every subcommand, in the order `ppstage --help` lists them.
inline constexpr Command kCommands[] = {
    {"train", "train a model split into pipeline stages (mpirun -np P ppstage train)", trainMain},
    {"compare-runs", "compare two training runs' losses and final parameters (numerics)",
     compareRunsMain},
    {"compare-compile", "the same training in compile modes none, stage, block, side by side",
     compareCompileMain},
    {"export", "a checkpoint's trained parameters in one TorchScript file of the original model",
     exportMain},
    {"plan", "pick the schedule, micro-batches, layout and cut for P ranks from measured costs",
     planMain},
    {"split", "cut a model into pipeline stages and print the plan (table or --json)", splitMain},
    {"schedule", "build, validate and simulate a pipeline schedule; print its timeline",
     scheduleMain},
    {"timeline", "draw a traced run's measured timeline (--output.trace) as SVG; time per rank",
     timelineMain},
    {"bench-comm", "MPI point-to-point latency and bandwidth against raw MPI (mpirun -np 2)",
     benchCommMain},
};

}  // namespace ppstage::cli
