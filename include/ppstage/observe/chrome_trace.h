// The trace file of `ppstage train --output.trace FILE.json`: Chrome's trace event format
// (JSON), which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// One process track per rank, named "rank r (stages ...)"; every event is a complete
// event ("ph": "X") on that track's one thread, with
//   name  "1F3", "0SEND_F2", "wait 1RECV_B3", "gradient sync", "all-reduce", "optimizer"
//   cat   compute | post | wait | gradient_sync | all_reduce | optimizer (trace.h)
//   ts, dur  microseconds on rank 0's clock since the alignment (clock_alignment.h)
//   args  step (1-based, as in the step lines of the log), and for actions kind ("F", "SEND_F",
//   ...), stage, micro-batch;
//         for waits wait_ms
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

// Collective over `world`: every rank's events go to rank 0, which writes `path`
// atomically. `track_name` is this rank's ("rank 1 (stages 1, 3)"); `about` (rank 0's)
// goes into the file's otherData.
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
// be read or is not such a trace.
TraceFile readChromeTrace(const std::string& path);

}  // namespace ppstage
