// The built-in schedules. Each file of schedules/ holds one; registerBuiltinSchedules()
// adds them all, through the same function type a plugin exports (schedule_api.h).
#pragma once

#include "ppstage/schedule/schedule_api.h"

namespace ppstage {

std::vector<ActionList> gpipeSchedule(const ScheduleRequest& request);
std::vector<ActionList> oneFOneBSchedule(const ScheduleRequest& request);
std::vector<ActionList> interleavedOneFOneBSchedule(const ScheduleRequest& request);
std::vector<ActionList> zeroBubbleH1Schedule(const ScheduleRequest& request);
std::vector<ActionList> zeroBubbleVSchedule(const ScheduleRequest& request);

// gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v.
void registerBuiltinSchedules(ScheduleRegistry* registry);

// Shared checks: one stage per rank, in a loop.
void requireOneStagePerRank(const ScheduleRequest& request, const char* schedule);

}  // namespace ppstage
