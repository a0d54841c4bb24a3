// See mpi_job.h.
#include "mpi_job.h"

#include <iostream>
#include <sstream>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/options.h"
#include "ppstage/core/error.h"
#include "ppstage/schedule/pipeline_schedule.h"

namespace ppstage::cli {

CommOptions commOptionsOf(const CommConfig& comm) {
  CommOptions options;
  if (comm.timeout_s > 0) {
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(comm.timeout_s * 1000));
  }
  return options;
}

std::unique_ptr<Communicator> startMpiCommand(const MpiCommandStart& start, const CommConfig& comm,
                                              std::set<std::string>* given) {
  std::ostringstream quiet;
  std::exception_ptr parse_error;
  bool help = false;
  try {
    help = !parseOptions(start.argc, start.argv, *start.options, start.usage,
                         mpiWorldRank() <= 0 ? std::cout : quiet, given);
    if (!help) start.validate();
  } catch (...) {
    parse_error = std::current_exception();
  }
  std::unique_ptr<Communicator> world =
      MpiCommunicator::world(parse_error ? CommOptions{} : commOptionsOf(comm));
  // Every rank parsed the same options; agree so one line reports a bad one.
  runAgreed(*world, [&] {
    if (parse_error) std::rethrow_exception(parse_error);
  });
  if (help) return nullptr;
  return world;
}

std::unique_ptr<Communicator> startTrainingCommand(const MpiCommandStart& start, Config& config) {
  std::set<std::string> given;
  std::string layout_note;
  MpiCommandStart training = start;
  training.validate = [&] {
    const ScheduleRegistry registry = makeScheduleRegistry(config.pipeline.schedule_plugin);
    layout_note = defaultScheduleLayout(registry, config.pipeline, given);
    ppstage::validate(config);
    start.validate();
  };
  std::unique_ptr<Communicator> world = startMpiCommand(training, config.comm, &given);
  if (world && world->rank() == 0 && !layout_note.empty() && !start.quiet()) {
    std::cout << layout_note << std::endl;
  }
  return world;
}

}  // namespace ppstage::cli
