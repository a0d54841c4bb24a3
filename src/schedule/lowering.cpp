// See include/ppstage/schedule/lowering.h.
#include "ppstage/schedule/lowering.h"

#include <algorithm>

namespace ppstage {

std::vector<ActionList> lowerCommunication(const ScheduleRequest& request,
                                           const std::vector<ActionList>& compute) {
  const bool lowered = std::any_of(compute.begin(), compute.end(), [](const ActionList& list) {
    return std::any_of(list.begin(), list.end(), [](const Action& a) { return !a.isCompute(); });
  });
  if (lowered) return compute;

  const int last = request.num_stages - 1;
  auto remote = [&](int from, int to) {
    return to >= 0 && to <= last && request.rank_of_stage.at(from) != request.rank_of_stage.at(to);
  };
  std::vector<ActionList> out(compute.size());
  for (size_t rank = 0; rank < compute.size(); ++rank) {
    ActionList& list = out[rank];
    for (const Action& a : compute[rank]) {
      const int s = a.stage, m = a.microbatch;
      switch (a.kind) {
        case ActionKind::kForward:
          if (remote(s, s - 1)) list.push_back({ActionKind::kRecvForward, s, m});
          list.push_back(a);
          if (remote(s, s + 1)) list.push_back({ActionKind::kSendForward, s, m});
          break;
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
          if (remote(s, s + 1)) list.push_back({ActionKind::kRecvBackward, s, m});
          list.push_back(a);
          if (remote(s, s - 1)) list.push_back({ActionKind::kSendBackward, s, m});
          break;
        default: list.push_back(a);
      }
    }
  }
  return out;
}

}  // namespace ppstage
