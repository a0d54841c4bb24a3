// See include/ppstage/schedule/pipeline_schedule.h.
#include "ppstage/schedule/pipeline_schedule.h"

#include <algorithm>

#include "builtin_schedules.h"
#include "ppstage/core/file.h"
#include "ppstage/schedule/lowering.h"
#include "ppstage/schedule/plugin_loader.h"
#include "ppstage/schedule/schedule_csv.h"

namespace ppstage {
namespace {

bool isCsvPath(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".csv") == 0;
}

// The request of `stages` on ranks of `stages_per_rank`, after the limits of the tags.
ScheduleRequest makeRequest(int stages, int microbatches, int stages_per_rank,
                            Placement placement) {
  PPSTAGE_CHECK(stages >= 1 && stages <= kMaxStages, "--pipeline.stages must be between 1 and ",
                kMaxStages, "; got ", stages);
  return scheduleRequestFor(Topology::forPipeline(stages, stages_per_rank, placement),
                            microbatches);
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

std::string knownNames(const ScheduleRegistry& registry) {
  std::string names;
  for (const std::string& name : registry.names()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

ScheduleOptions scheduleOptionsFor(const PipelineConfig& pipeline, int stages,
                                   int stages_per_rank) {
  ScheduleOptions options;
  options.schedule = pipeline.schedule;
  options.stages = stages;
  options.microbatches =
      pipeline.microbatches > 0 ? static_cast<int>(pipeline.microbatches) : 2 * stages;
  options.stages_per_rank = stages_per_rank;
  options.placement = pipeline.placement;
  return options;
}

ScheduleRequest scheduleRequestFor(const Topology& pipeline, int microbatches) {
  PPSTAGE_CHECK(microbatches >= 1 && microbatches <= kMaxMicrobatches,
                "--pipeline.microbatches must be between 1 and ", kMaxMicrobatches, "; got ",
                microbatches);
  ScheduleRequest request;
  request.num_stages = pipeline.numStages();
  request.num_microbatches = microbatches;
  request.stages_per_rank = pipeline.stagesPerRank();
  request.placement = pipeline.placement();
  for (int s = 0; s < pipeline.numStages(); ++s) {
    request.rank_of_stage.push_back(pipeline.ppRankOfStage(s));
  }
  request.stages_of_rank = pipeline.stagesOfEveryRank();
  return request;
}

std::string defaultScheduleLayout(const ScheduleRegistry& registry, PipelineConfig& pipeline,
                                  const std::set<std::string>& given) {
  const ScheduleLayout* needs = registry.layout(pipeline.schedule);
  if (needs == nullptr) return "";
  std::string set;
  if (needs->stages_per_rank > 0 && given.count("pipeline.stages_per_rank") == 0 &&
      pipeline.stages_per_rank != needs->stages_per_rank) {
    pipeline.stages_per_rank = needs->stages_per_rank;
    set = "--pipeline.stages_per_rank " + std::to_string(needs->stages_per_rank);
  }
  if (needs->placement && given.count("pipeline.placement") == 0 &&
      pipeline.placement != *needs->placement) {
    pipeline.placement = *needs->placement;
    set += std::string(set.empty() ? "" : " and ") + "--pipeline.placement " +
           toString(*needs->placement);
  }
  if (set.empty()) return "";
  return pipeline.schedule + " " + needs->why + ": " + set + " (set them to choose otherwise)";
}

ScheduleRegistry makeScheduleRegistry(const std::string& plugin_path) {
  ScheduleRegistry registry;
  registerBuiltinSchedules(&registry);
  if (!plugin_path.empty()) loadSchedulePlugin(registry, plugin_path);
  return registry;
}

namespace {

// A factory's (a plugin's) actions name stages and micro-batches of the request: checked
// before lowering indexes anything by them.
void checkActionsInRange(const ScheduleRequest& request, const std::vector<ActionList>& ranks,
                         const std::string& schedule) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const Action& a : ranks[r]) {
      PPSTAGE_CHECK(a.stage >= 0 && a.stage < request.num_stages && a.microbatch >= 0 &&
                        a.microbatch < request.num_microbatches,
                    "schedule '", schedule, "' gives rank ", r, " the action ", toString(a),
                    ", which names a stage or micro-batch outside the ", request.num_stages,
                    " stages and ", request.num_microbatches, " micro-batches (from 0)");
    }
  }
}

}  // namespace

PipelineSchedule buildSchedule(const ScheduleRegistry& registry, const ScheduleOptions& o) {
  if (isCsvPath(o.schedule))
    return scheduleFromTable(readFile(o.schedule, "schedule table"), o.schedule, o);
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
  checkActionsInRange(out.request, compute, o.schedule);
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
