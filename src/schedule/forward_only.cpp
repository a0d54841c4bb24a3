// See include/ppstage/schedule/forward_only.h.
#include "ppstage/schedule/forward_only.h"

#include "ppstage/schedule/lowering.h"

namespace ppstage {

std::vector<ActionList> forwardOnlySchedule(const ScheduleRequest& request) {
  std::vector<ActionList> compute(static_cast<size_t>(request.numRanks()));
  for (int rank = 0; rank < request.numRanks(); ++rank) {
    for (int m = 0; m < request.num_microbatches; ++m) {
      for (int stage : request.stagesOf(rank)) compute[rank].push_back(forwardOf(stage, m));
    }
  }
  return lowerCommunication(request, compute);
}

}  // namespace ppstage
