// An out-of-tree schedule plugin: GPipe whose backwards run last micro-batch first, the
// reverse of the order the forwards made their activations (so the newest, still in cache,
// go first). Build it with the few lines of CMakeLists.txt beside it and load it with
//   ppstage schedule --pipeline.schedule_plugin libreverse_gpipe_schedule.so \
//       --pipeline.schedule reverse-gpipe --pipeline.stages 4 --pipeline.microbatches 8
// It needs ppstage's headers only.
#include "ppstage/schedule/schedule_api.h"

namespace {

std::vector<ppstage::ActionList> reverseGpipe(const ppstage::ScheduleRequest& request) {
  PPSTAGE_CHECK(request.stages_per_rank == 1, "reverse-gpipe runs one stage per rank");
  std::vector<ppstage::ActionList> ranks(request.numRanks());
  for (int s = 0; s < request.num_stages; ++s) {
    ppstage::ActionList& list = ranks[request.rank_of_stage[s]];
    for (int m = 0; m < request.num_microbatches; ++m) list.push_back(ppstage::forwardOf(s, m));
    for (int m = request.num_microbatches - 1; m >= 0; --m) {
      list.push_back(ppstage::backwardOf(s, m));
    }
  }
  return ranks;
}

}  // namespace

extern "C" void ppstage_register_schedules(ppstage::ScheduleRegistry* registry) {
  registry->add("reverse-gpipe",
                "GPipe with backwards in reverse micro-batch order (example plugin)", reverseGpipe);
}
