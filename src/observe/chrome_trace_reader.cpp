// See include/ppstage/observe/chrome_trace.h: the reader `ppstage timeline` uses, and the
// track names both sides use, apart from the writer so that they build (and are fuzzed)
// without a communicator.
#include "ppstage/observe/chrome_trace.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/json_integer.h"

namespace ppstage {
namespace {

TraceKind kindOfCategory(const std::string& cat, const std::string& path) {
  for (TraceKind k : {TraceKind::kCompute, TraceKind::kPost, TraceKind::kWait,
                      TraceKind::kGradientSync, TraceKind::kAllReduce, TraceKind::kOptimizer,
                      TraceKind::kTensorParallel, TraceKind::kRecompute}) {
    if (cat == toString(k)) return k;
  }
  throw Error(
      detail::concat("'", path, "' is not a ppstage trace: an event of category '", cat, "'"));
}

TracedEvent tracedEvent(const nlohmann::json& e, const std::string& path) {
  TracedEvent t;
  t.name = e.at("name").get<std::string>();
  t.kind = kindOfCategory(e.at("cat").get<std::string>(), path);
  const nlohmann::json& args = e.at("args");
  t.step = jsonIntegerAt(args, "step", path);
  if (hasAction(t.kind)) {
    t.action = parseAction(
        detail::concat(jsonIntegerAt<int>(args, "stage", path), args.at("kind").get<std::string>(),
                       jsonIntegerAt<int>(args, "microbatch", path)),
        path);
  }
  t.start_us = e.at("ts").get<double>();
  t.end_us = t.start_us + e.at("dur").get<double>();
  return t;
}

}  // namespace

std::string rankTrackName(int rank, const std::vector<int>& stages, int replica) {
  std::string name = detail::concat("rank ", rank, " (stage", stages.size() > 1 ? "s " : " ");
  for (size_t i = 0; i < stages.size(); ++i) name += detail::concat(i > 0 ? ", " : "", stages[i]);
  if (replica >= 0) name += detail::concat("; replica ", replica);
  return name + ")";
}

std::string TraceFile::aboutValue(const std::string& key) const {
  for (const auto& [k, value] : about) {
    if (k == key) return value;
  }
  return "";
}

TraceFile readChromeTrace(const std::string& path) {
  return parseChromeTrace(readFile(path, "trace"), path);
}

TraceFile parseChromeTrace(const std::string& text, const std::string& path) {
  std::map<int, RankTrack> tracks;
  TraceFile file;
  try {
    const nlohmann::json trace = nlohmann::json::parse(text);
    if (trace.contains("otherData")) {
      for (const auto& [key, value] : trace.at("otherData").items()) {
        file.about.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
      }
    }
    for (const nlohmann::json& e : trace.at("traceEvents")) {
      const std::string phase = e.at("ph").get<std::string>();
      if (!e.contains("pid")) continue;
      const int pid = jsonIntegerAt<int>(e, "pid", path);
      if (phase == "M" && e.at("name") == "process_name") {
        tracks[pid].rank = pid;
        tracks[pid].name = e.at("args").at("name").get<std::string>();
      } else if (phase == "X") {
        tracks[pid].rank = pid;
        tracks[pid].events.push_back(tracedEvent(e, path));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::concat("'", path, "' is not a ppstage trace: ", e.what()));
  }
  const bool has_events = std::any_of(tracks.begin(), tracks.end(),
                                      [](const auto& t) { return !t.second.events.empty(); });
  PPSTAGE_CHECK(has_events, "'", path, "' is not a ppstage trace: it has no events");
  for (auto& [pid, track] : tracks) {
    std::stable_sort(
        track.events.begin(), track.events.end(),
        [](const TracedEvent& a, const TracedEvent& b) { return a.start_us < b.start_us; });
    file.ranks.push_back(std::move(track));
  }
  return file;
}

}  // namespace ppstage
