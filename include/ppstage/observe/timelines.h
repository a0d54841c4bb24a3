// The two timelines ppstage draws (timeline_svg.h): the planned one, from the schedule's
// simulation (`ppstage schedule --svg`), and the measured one, from a trace
// (`ppstage timeline --trace FILE.json --svg`).
#pragma once

#include <string>
#include <vector>

#include "ppstage/observe/timeline_svg.h"
#include "ppstage/schedule/action.h"

namespace ppstage {

struct ActionCosts;
struct ScheduleRequest;
struct SimulationResult;
struct TraceFile;

// Every compute action of `schedule` where the simulator placed it, in cost units.
Timeline plannedTimeline(const std::string& schedule, const ScheduleRequest& request,
                         const std::vector<ActionList>& ranks, const SimulationResult& result,
                         const ActionCosts& costs);

// One step of the trace, or all of them: `step` is "median" (the step of median length),
// "all", or a step number as the log prints it (1-based). Times in ms from the step's
// first event on any rank. Throws ppstage::Error for a step the trace does not hold.
Timeline measuredTimeline(const TraceFile& trace, const std::string& step);

}  // namespace ppstage
