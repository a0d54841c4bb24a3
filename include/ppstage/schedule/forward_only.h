// The forward-only schedule of evaluation: no backward, so no gradients are kept and no
// micro-batch waits for one. Each rank runs F of every micro-batch through its stages in
// increasing order (micro-batch major), lowered with the sends and receives between ranks.
// Every F needs only an earlier stage of its own micro-batch and sends are only posted,
// so no order of ranks can deadlock.
#pragma once

#include <vector>

#include "ppstage/schedule/schedule_api.h"

namespace ppstage {

// Every pipeline rank's lowered forward-only list for `request`.
std::vector<ActionList> forwardOnlySchedule(const ScheduleRequest& request);

}  // namespace ppstage
