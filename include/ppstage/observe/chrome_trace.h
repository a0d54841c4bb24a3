// The trace file of `ppstage train --output.trace FILE.json`: Chrome's trace event format
// (JSON), which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// One process track per rank, named "rank r (stages ...)"; every event is a complete
// event ("ph": "X") on that track's one thread, with
//   name  "1F3", "0SEND_F2", "wait 1RECV_B3", "gradient sync", "all-reduce", "optimizer"
//   cat   compute | post | wait | gradient_sync | all_reduce | optimizer (trace.h)
//   ts, dur  microseconds on rank 0's clock since the alignment (clock_alignment.h)
//   args  step (1-based, as the step lines count); for actions also kind ("F",
//         "SEND_F", ...), stage and microbatch; for waits also wait_ms
// The events of a track follow each other in time: a rank does one thing at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ppstage/observe/trace.h"

namespace ppstage {

class Communicator;
struct ClockAlignment;

// "rank 1 (stage 1)", "rank 0 (stages 0, 2)", "rank 2 (stage 1; replica 1)" (replica < 0:
// none): a rank's track name, and a timeline row's.
std::string rankTrackName(int rank, const std::vector<int>& stages, int replica = -1);

// Collective over `world`: every rank's events go to rank 0 (gatherStrings), which writes
// `path` atomically. `track_name` is this rank's (rankTrackName); `about` (rank 0's) goes
// into the file's otherData. Blocks; throws CommError when a peer does not answer within
// the timeout, ppstage::Error when rank 0 cannot write the file.
void writeChromeTrace(Communicator& world, const TraceRecorder& trace, const ClockAlignment& clock,
                      const std::string& track_name,
                      const std::vector<std::pair<std::string, std::string>>& about,
                      const std::string& path);

// An event read back from a trace file.
struct TracedEvent {
  std::string name;
  TraceKind kind = TraceKind::kCompute;
  Action action;     // compute, post and wait events
  int64_t step = 1;  // 1-based
  double start_us = 0;
  double end_us = 0;
};

struct RankTrack {
  int rank = 0;
  std::string name;
  std::vector<TracedEvent> events;  // in time order
};

struct TraceFile {
  std::vector<RankTrack> ranks;                            // in rank order
  std::vector<std::pair<std::string, std::string>> about;  // otherData: schedule, model, ...
  // otherData's `key`; empty when absent.
  std::string aboutValue(const std::string& key) const;
};

// A file written by writeChromeTrace. Throws ppstage::Error naming the file when it cannot
// be read or is not such a trace (no complete events, an unknown category, a missing arg).
// The whole file is parsed in memory.
TraceFile readChromeTrace(const std::string& path);
// The same for a trace's text; `path` only names it in errors.
TraceFile parseChromeTrace(const std::string& text, const std::string& path);

}  // namespace ppstage
