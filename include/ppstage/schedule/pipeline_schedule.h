// From a schedule's name (or CSV table) to the validated, lowered action lists every rank
// runs: registry -> factory -> lowering -> validation and simulation.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/core/pipeline_limits.h"
#include "ppstage/core/topology.h"
#include "ppstage/schedule/schedule_api.h"
#include "ppstage/schedule/simulator.h"

namespace ppstage {

// The built-in schedules, plus those of the plugin at `plugin_path` when it is not empty.
ScheduleRegistry makeScheduleRegistry(const std::string& plugin_path = "");

struct ScheduleOptions {
  std::string schedule = "1f1b";  // a registered name, or a path ending in .csv
  int stages = 0;                 // 0: from the CSV table
  int microbatches = 0;           // 0: from the CSV table
  int stages_per_rank = 1;
  Placement placement = Placement::kLoop;
  ActionCosts costs;
};

// What [pipeline] asks for, for `stages` stages at `stages_per_rank` per rank (the job's
// layout; 0 stages: a table's): the micro-batches default to twice the stages. What
// `ppstage train` and `ppstage schedule` both build their schedules from.
ScheduleOptions scheduleOptionsFor(const PipelineConfig& pipeline, int stages, int stages_per_rank);

// What a schedule is asked for: `pipeline`'s stages, their ranks and placement, and
// `microbatches`. Throws ppstage::Error beyond kMaxMicrobatches.
ScheduleRequest scheduleRequestFor(const Topology& pipeline, int microbatches);

struct PipelineSchedule {
  std::string name;
  ScheduleRequest request;
  std::vector<ActionList> ranks;  // lowered: communication included
  SimulationResult simulation;    // with ScheduleOptions::costs
};

// Throws ppstage::Error for an unknown name (listing the known ones), a request the
// schedule refuses, an unreadable or malformed table; ScheduleError for an invalid one.
PipelineSchedule buildSchedule(const ScheduleRegistry& registry, const ScheduleOptions& options);

// The layout the schedule needs (ScheduleLayout, as `registry` holds it), where the user
// left it to the schedule: zb-v runs two stages per rank placed in a V, so
// --pipeline.stages_per_rank and --pipeline.placement default to 2 and v for it unless
// `given` (the options the user set) names them. Returns what it set as a line for the
// log, "" when it set nothing (or the schedule is not in `registry`).
std::string defaultScheduleLayout(const ScheduleRegistry& registry, PipelineConfig& pipeline,
                                  const std::set<std::string>& given);

// The same for a table's text (what buildSchedule reads from a .csv file); `source` names
// it in errors. Its shape (stages, micro-batches, ranks, placement) comes from the table.
PipelineSchedule scheduleFromTable(const std::string& text, const std::string& source,
                                   const ScheduleOptions& options);

}  // namespace ppstage
