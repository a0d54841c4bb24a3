// See include/ppstage/observe/chrome_trace.h.
#include "ppstage/observe/chrome_trace.h"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/observe/clock_alignment.h"

namespace ppstage {
namespace {

// printf into `out`: a line of one event is far below the buffer's size.
template <typename... Args>
void appendFormatted(std::string& out, const char* format, Args... args) {
  char text[256];
  const int n = std::snprintf(text, sizeof text, format, args...);
  PPSTAGE_INTERNAL_ASSERT(n >= 0 && static_cast<size_t>(n) < sizeof text, "trace text of ", n,
                          " characters for '", format, "'");
  out.append(text, static_cast<size_t>(n));
}

// One event as a line of JSON (names are plain ASCII: no escaping needed).
void appendEvent(std::string& out, int rank, const TraceEvent& e, const ClockAlignment& clock) {
  const double ts = static_cast<double>(clock.sinceOrigin(e.start_ns)) / 1e3;
  const double dur = static_cast<double>(e.end_ns - e.start_ns) / 1e3;
  appendFormatted(out,
                  ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,"
                  "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%lld",
                  eventName(e).c_str(), toString(e.kind), rank, ts, dur,
                  static_cast<long long>(e.step + 1));
  if (hasAction(e.kind)) {
    appendFormatted(out, ",\"kind\":\"%s\",\"stage\":%d,\"microbatch\":%d", kindName(e.action.kind),
                    e.action.stage, e.action.microbatch);
  }
  if (e.kind == TraceKind::kWait) appendFormatted(out, ",\"wait_ms\":%.4f", dur / 1e3);
  out += "}}";
}

// This rank's part of the file: its track's names, then its events.
std::string rankPart(int rank, const TraceRecorder& trace, const ClockAlignment& clock,
                     const std::string& track_name) {
  nlohmann::json meta = nlohmann::json::array();
  meta.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", track_name}}}});
  meta.push_back({{"name", "process_sort_index"},
                  {"ph", "M"},
                  {"pid", rank},
                  {"args", {{"sort_index", rank}}}});
  meta.push_back({{"name", "thread_name"},
                  {"ph", "M"},
                  {"pid", rank},
                  {"tid", 0},
                  {"args", {{"name", "actions"}}}});
  const std::string dropped = trace.dropped() > 0 ? "; events dropped past the limit" : "";
  std::string labels = "the trace's clock" + dropped;
  if (rank != 0) {
    labels.clear();
    appendFormatted(labels, "clock offset to rank 0 %.1f us (round trip %.1f us)",
                    static_cast<double>(clock.offset_ns) / 1e3,
                    static_cast<double>(clock.round_trip_ns) / 1e3);
    labels += dropped;
  }
  meta.push_back(
      {{"name", "process_labels"}, {"ph", "M"}, {"pid", rank}, {"args", {{"labels", labels}}}});
  std::string out;
  for (const nlohmann::json& m : meta) out += ",\n" + m.dump();
  out.reserve(out.size() + trace.events().size() * 200);
  for (const TraceEvent& e : trace.events()) appendEvent(out, rank, e, clock);
  return out;
}

}  // namespace

void writeChromeTrace(Communicator& world, const TraceRecorder& trace, const ClockAlignment& clock,
                      const std::string& track_name,
                      const std::vector<std::pair<std::string, std::string>>& about,
                      const std::string& path) {
  const std::vector<std::string> parts =
      gatherStrings(world, rankPart(world.rank(), trace, clock, track_name), 0);
  if (world.rank() != 0) return;
  nlohmann::json other = nlohmann::json::object();
  for (const auto& [key, value] : about) other[key] = value;
  std::string file =
      "{\"displayTimeUnit\":\"ms\",\"otherData\":" + other.dump() + ",\n\"traceEvents\":[";
  size_t size = file.size() + 4;
  for (const std::string& part : parts) size += part.size();
  file.reserve(size);
  for (size_t r = 0; r < parts.size(); ++r) {
    file.append(parts[r], r == 0 ? 1 : 0, std::string::npos);  // each begins with ",\n"
  }
  file += "\n]}\n";
  writeFileAtomically(path, file);
}

}  // namespace ppstage
