// `ppstage train`: pipelined training under mpirun (or as one process).
#include "commands.h"

#include <boost/program_options.hpp>

#include <iostream>

#include "mpi_job.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/options.h"
#include "ppstage/observe/progress_line.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/train/trainer.h"
#include "run_command.h"

namespace ppstage::cli {

int trainMain(int argc, const char* const* argv) {
  Config config;
  po::options_description options;
  addAllOptions(options, config);
  const char* usage =
      "usage: mpirun -np P ppstage train [--config FILE] [options]\n\n"
      "Splits the model into stages (default: one per pipeline rank), places them on the\n"
      "ranks, and trains with the schedule (default 1f1b): every step cuts the global batch\n"
      "into micro-batches (per data-parallel replica), runs each rank's forward and backward\n"
      "actions, sums tied and data-parallel gradients, clips the global gradient norm and\n"
      "steps the optimizer. World size = (stages / stages_per_rank) x --train.dp.\n"
      "With no options it trains the built-in gpt on the embedded public-domain text.\n"
      "Rank 0 prints the configuration, the split plan and one line per logged step.";

  installCountingAllocator();  // before the model's tensors are made
  MpiSession mpi;
  MpiCommandStart start;
  start.argc = argc;
  start.argv = argv;
  start.options = &options;
  start.usage = usage;
  const std::unique_ptr<Communicator> world = startTrainingCommand(start, config);
  if (!world) return 0;
  return runCommand([&] {
    train(config, *world, std::cout, world->rank() == 0 && stdoutIsTerminal());
    return 0;
  });
}

}  // namespace ppstage::cli
