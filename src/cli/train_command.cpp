// `ppstage train`: pipelined training under mpirun (or as one process).
#include <boost/program_options.hpp>

#include <exception>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "mpi_job.h"
#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/options.h"
#include "ppstage/core/allocator.h"
#include "ppstage/train/trainer.h"

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

  keepFreedMemoryForReuse();
  MpiSession mpi;
  std::ostringstream quiet;
  std::exception_ptr parse_error;
  bool help = false;
  try {
    help = !parseOptions(argc, argv, options, usage, mpi.worldRank() == 0 ? std::cout : quiet);
    if (!help) {
      validate(config.model);
      validate(config.pipeline);
      validate(config.train);
      validate(config.comm);
      validate(config.compile);
      validate(config.output);
    }
  } catch (...) {
    parse_error = std::current_exception();
  }
  CommOptions comm_options;
  if (!parse_error && config.comm.timeout_s > 0) {
    comm_options.timeout =
        std::chrono::milliseconds(static_cast<int64_t>(config.comm.timeout_s * 1000));
  }
  auto world = MpiCommunicator::world(comm_options);
  // Every rank parsed the same options; agree so one line reports a bad one.
  runAgreed(*world, [&] {
    if (parse_error) std::rethrow_exception(parse_error);
  });
  if (help) return 0;
  return runMpiJob([&] {
    train(config, *world, std::cout);
    return 0;
  });
}

}  // namespace ppstage::cli
