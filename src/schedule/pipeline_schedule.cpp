// See include/ppstage/schedule/pipeline_schedule.h.
#include "ppstage/schedule/pipeline_schedule.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "builtin_schedules.h"
#include "ppstage/comm/topology.h"
#include "ppstage/schedule/lowering.h"
#include "ppstage/schedule/schedule_csv.h"

namespace ppstage {
namespace {

bool isCsvPath(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".csv") == 0;
}

ScheduleRequest makeRequest(int stages, int microbatches, int stages_per_rank,
                            Placement placement) {
  PPSTAGE_CHECK(stages >= 1 && stages <= kMaxStages, "--pipeline.stages must be between 1 and ",
                kMaxStages, "; got ", stages);
  PPSTAGE_CHECK(microbatches >= 1 && microbatches <= kMaxMicrobatches,
                "--pipeline.microbatches must be between 1 and ", kMaxMicrobatches, "; got ",
                microbatches);
  PPSTAGE_CHECK(stages_per_rank >= 1 && stages % stages_per_rank == 0, stages,
                " stages cannot be spread over ranks at ", stages_per_rank,
                " per rank (--pipeline.stages_per_rank must divide --pipeline.stages)");
  const int ranks = stages / stages_per_rank;
  const Topology topology = Topology::create(ranks, 0, ranks, 1, stages, placement);
  ScheduleRequest request{stages, microbatches, stages_per_rank, placement, {}};
  for (int s = 0; s < stages; ++s) request.rank_of_stage.push_back(topology.ppRankOfStage(s));
  return request;
}

// A table's shape comes from its content; given sizes must agree with it.
ScheduleRequest requestOfTable(const std::vector<ActionList>& ranks, const ScheduleOptions& o,
                               const std::string& source) {
  int stages = 0, microbatches = 0;
  for (const ActionList& list : ranks) {
    for (const Action& a : list) {
      stages = std::max(stages, a.stage + 1);
      microbatches = std::max(microbatches, a.microbatch + 1);
    }
  }
  PPSTAGE_CHECK(o.stages == 0 || o.stages == stages, source, " has ", stages,
                " stages but --pipeline.stages is ", o.stages);
  PPSTAGE_CHECK(o.microbatches == 0 || o.microbatches == microbatches, source, " has ",
                microbatches, " micro-batches but --pipeline.microbatches is ", o.microbatches);
  const int rank_count = static_cast<int>(ranks.size());
  const int per_rank = stages >= rank_count && stages % rank_count == 0 ? stages / rank_count : 0;
  PPSTAGE_CHECK(per_rank >= 1, source, " has ", rank_count, " ranks for ", stages,
                " stages; each rank must run the same number");
  // Loop unless the table's first rank holds the last stage (a V).
  const bool v =
      per_rank == 2 && std::any_of(ranks[0].begin(), ranks[0].end(),
                                   [&](const Action& a) { return a.stage == stages - 1; });
  return makeRequest(stages, microbatches, per_rank, v ? Placement::kV : Placement::kLoop);
}

std::string readFile(const std::string& path) {
  std::ifstream file(path);
  PPSTAGE_CHECK(file.good(), "cannot read schedule table '", path, "'");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string knownNames(const ScheduleRegistry& registry) {
  std::string names;
  for (const std::string& name : registry.names()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

ScheduleRegistry makeScheduleRegistry(const std::string& plugin_path) {
  ScheduleRegistry registry;
  registerBuiltinSchedules(&registry);
  if (!plugin_path.empty()) loadSchedulePlugin(registry, plugin_path);
  return registry;
}

PipelineSchedule buildSchedule(const ScheduleRegistry& registry, const ScheduleOptions& o) {
  if (isCsvPath(o.schedule)) return scheduleFromTable(readFile(o.schedule), o.schedule, o);
  PipelineSchedule out;
  out.name = o.schedule;
  std::vector<ActionList> compute;
  {
    const ScheduleFactory* factory = registry.find(o.schedule);
    PPSTAGE_CHECK(factory != nullptr, "unknown schedule '", o.schedule,
                  "'; known schedules: ", knownNames(registry),
                  " (or a .csv table, or --pipeline.schedule_plugin)");
    out.request = makeRequest(o.stages, o.microbatches, o.stages_per_rank, o.placement);
    compute = (*factory)(out.request);
  }
  out.ranks = lowerCommunication(out.request, compute);
  out.simulation = simulateSchedule(out.request, out.ranks, o.costs);
  return out;
}

PipelineSchedule scheduleFromTable(const std::string& text, const std::string& source,
                                   const ScheduleOptions& o) {
  PipelineSchedule out;
  out.name = source;
  const std::vector<ActionList> table = scheduleFromCsv(text, source);
  out.request = requestOfTable(table, o, source);
  out.ranks = lowerCommunication(out.request, table);
  out.simulation = simulateSchedule(out.request, out.ranks, o.costs);
  return out;
}

}  // namespace ppstage
