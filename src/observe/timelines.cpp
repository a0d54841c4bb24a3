// See include/ppstage/observe/timelines.h.
#include "ppstage/observe/timelines.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "ppstage/core/error.h"
#include "ppstage/observe/chrome_trace.h"
#include "ppstage/schedule/simulator.h"

namespace ppstage {
namespace {

BoxKind boxKindOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return BoxKind::kForward;
    case ActionKind::kBackward: return BoxKind::kBackward;
    case ActionKind::kBackwardInput: return BoxKind::kInputGrad;
    case ActionKind::kBackwardWeight: return BoxKind::kWeightGrad;
    default: return BoxKind::kPost;
  }
}

BoxKind boxKindOf(const TracedEvent& e) {
  switch (e.kind) {
    case TraceKind::kCompute: return boxKindOf(e.action.kind);
    case TraceKind::kPost: return BoxKind::kPost;
    case TraceKind::kWait: return BoxKind::kWait;
    case TraceKind::kGradientSync: return BoxKind::kGradientSync;
    case TraceKind::kAllReduce: return BoxKind::kAllReduce;
    case TraceKind::kOptimizer: return BoxKind::kOptimizer;
    case TraceKind::kTensorParallel: return BoxKind::kTensorParallel;
    case TraceKind::kRecompute: return BoxKind::kRecompute;
  }
  return BoxKind::kPost;
}

std::string fixed(double x, int digits) {
  char out[32];
  std::snprintf(out, sizeof out, "%.*f", digits, x);
  return out;
}

// The v of `stage` among `stages` (a rank's, increasing): its shade.
int indexOf(const std::vector<int>& stages, int stage) {
  const auto it = std::find(stages.begin(), stages.end(), stage);
  return it == stages.end() ? 0 : static_cast<int>(it - stages.begin());
}

// The first and last instant of every step, over all ranks (ms).
std::map<int64_t, std::pair<double, double>> stepSpans(const TraceFile& trace) {
  std::map<int64_t, std::pair<double, double>> spans;
  for (const RankTrack& track : trace.ranks) {
    for (const TracedEvent& e : track.events) {
      const auto [it, fresh] = spans.try_emplace(e.step, e.start_us / 1e3, e.end_us / 1e3);
      it->second.first = std::min(it->second.first, e.start_us / 1e3);
      it->second.second = std::max(it->second.second, e.end_us / 1e3);
    }
  }
  return spans;
}

// The step of median length (the shorter of the two middle ones).
int64_t medianStep(const std::map<int64_t, std::pair<double, double>>& spans) {
  std::vector<std::pair<double, int64_t>> lengths;
  for (const auto& [step, span] : spans) lengths.emplace_back(span.second - span.first, step);
  std::sort(lengths.begin(), lengths.end());
  return lengths[(lengths.size() - 1) / 2].second;
}

TimelineBox boxOf(const TracedEvent& e, const std::vector<int>& stages, double origin_ms) {
  TimelineBox box;
  box.start = e.start_us / 1e3 - origin_ms;
  box.end = e.end_us / 1e3 - origin_ms;
  box.kind = boxKindOf(e);
  if (e.kind == TraceKind::kCompute) {
    box.label = std::to_string(e.action.microbatch);
    box.shade = indexOf(stages, e.action.stage);
  }
  box.tooltip = detail::concat(e.name, ", step ", e.step, ": ", fixed(box.end - box.start, 3),
                               " ms from ", fixed(box.start, 3), " ms");
  return box;
}

// "--step N": N; anything else is an error.
int64_t stepNumber(const std::string& text) {
  size_t used = 0;
  int64_t step = 0;
  try {
    step = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  PPSTAGE_CHECK(used > 0 && used == text.size(), "--step '", text,
                "' is not median, all or a step number");
  return step;
}

// A rank's stages: those its compute events name.
std::vector<int> stagesOf(const RankTrack& track) {
  std::set<int> stages;
  for (const TracedEvent& e : track.events) {
    if (e.kind == TraceKind::kCompute) stages.insert(e.action.stage);
  }
  return {stages.begin(), stages.end()};
}

}  // namespace

Timeline plannedTimeline(const std::string& schedule, const ScheduleRequest& request,
                         const std::vector<ActionList>& ranks, const SimulationResult& result,
                         const ActionCosts& costs) {
  Timeline t;
  t.title = detail::concat("planned: ", schedule, ", ", request.num_stages, " stages on ",
                           request.numRanks(), " ranks, ", request.num_microbatches,
                           " micro-batches (ppstage schedule)");
  t.subtitle =
      detail::concat("simulated with costs F=", costs.forward, " B=", costs.backward,
                     " I=", costs.input_grad, " W=", costs.weight_grad, "; makespan ",
                     result.makespan, ", bubble fraction ", fixed(result.bubble_fraction, 3));
  t.unit = "cost units";
  t.end = result.makespan;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<int>& stages = request.stagesOf(static_cast<int>(r));
    TimelineRow row{rankTrackName(static_cast<int>(r), stages), {}};
    for (size_t p = 0; p < ranks[r].size(); ++p) {
      const Action& a = ranks[r][p];
      const double cost = costs.of(a.kind, a.stage);
      if (!a.isCompute() || cost <= 0) continue;
      TimelineBox box{result.start[r][p],           result.start[r][p] + cost, boxKindOf(a.kind),
                      std::to_string(a.microbatch), indexOf(stages, a.stage),  ""};
      box.tooltip = detail::concat(toString(a), ": from ", box.start, " to ", box.end);
      row.boxes.push_back(std::move(box));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

Timeline measuredTimeline(const TraceFile& trace, const std::string& step) {
  const auto spans = stepSpans(trace);
  PPSTAGE_CHECK(!spans.empty(), "the trace has no steps");
  const bool all = step == "all";
  int64_t chosen = 0;
  if (!all) {
    chosen = step == "median" ? medianStep(spans) : stepNumber(step);
    PPSTAGE_CHECK(spans.count(chosen) == 1, "--step ", step, ": the trace holds steps ",
                  spans.begin()->first, " to ", spans.rbegin()->first);
  }
  const double begin = all ? spans.begin()->second.first : spans.at(chosen).first;
  const double end = all ? spans.rbegin()->second.second : spans.at(chosen).second;
  Timeline t;
  t.unit = "ms";
  t.end = end - begin;
  const std::string what =
      all ? detail::concat("steps ", spans.begin()->first, " to ", spans.rbegin()->first)
          : detail::concat("step ", chosen, step == "median" ? " (the median one)" : "");
  const std::string dp = trace.aboutValue("dp");
  const std::string replicas =
      dp.empty() || dp == "1" ? ""
                              : detail::concat(" (pp ", trace.aboutValue("pp"), " x dp ", dp, ")");
  t.title = detail::concat("measured: ", trace.aboutValue("schedule"), ", ",
                           trace.aboutValue("stages"), " stages on ", trace.ranks.size(), " ranks",
                           replicas, ", ", trace.aboutValue("microbatches"), " micro-batches, ",
                           what, ": ", fixed(t.end, 1), " ms (ppstage train)");
  double busy = 0;
  for (const RankTrack& track : trace.ranks) {
    const std::vector<int> stages = stagesOf(track);
    TimelineRow row{track.name.empty() ? rankTrackName(track.rank, stages) : track.name, {}};
    for (const TracedEvent& e : track.events) {
      if (!all && e.step != chosen) continue;
      row.boxes.push_back(boxOf(e, stages, begin));
      if (e.kind == TraceKind::kCompute) busy += (e.end_us - e.start_us) / 1e3;
    }
    t.rows.push_back(std::move(row));
  }
  const std::string model = trace.aboutValue("model");  // a file's name, not its whole path
  t.subtitle = detail::concat(
      "model ", model.substr(model.find_last_of('/') + 1), ", compile ",
      trace.aboutValue("compile"), "; compute busy ",
      fixed(t.end > 0 ? 100 * busy / (t.end * static_cast<double>(t.rows.size())) : 0, 1),
      "% of ranks x time; boxes: actions as traced (--output.trace)");
  if (all) {
    const size_t every = std::max<size_t>(1, spans.size() / 20);
    size_t i = 0;
    for (const auto& [s, span] : spans) {
      if (i++ % every == 0) t.marks.push_back({span.first - begin, detail::concat("step ", s)});
    }
  }
  return t;
}

}  // namespace ppstage
