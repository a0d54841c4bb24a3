// What each rank ran, and when: the events behind `--output.trace FILE.json`.
//
// The executor records every action it runs (F, B, I, W; the posting of each SEND and
// RECV; the wait for each to complete) and the step runner what follows the actions (the
// gradient sync, the step's all-reduce, the optimizer step). Times are this rank's
// steady clock; clock_alignment.h puts them on rank 0's and chrome_trace.h writes one file. A rank
// that does not trace has no recorder: the executor checks a null pointer, nothing else.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ppstage/schedule/action.h"

namespace ppstage {

enum class TraceKind : uint8_t {
  kCompute,         // F, B, I or W of (stage, micro-batch)
  kPost,            // posting a SEND or RECV of (stage, micro-batch): returns at once
  kWait,            // waiting for a posted SEND or RECV to complete
  kGradientSync,    // data-parallel and tied-weight gradient sums
  kAllReduce,       // the step's one world all-reduce (loss, norm, costs, ...)
  kOptimizer,       // clipping and the optimizer step
  kTensorParallel,  // one all-reduce of a tensor-parallel group, inside a compute event
  kRecompute,       // a recomputed block's forward run again, inside a B or I event
};

// "compute", "post", "wait", "gradient_sync", "all_reduce", "optimizer", "tp", "recompute": the
// Chrome trace's category of the event.
const char* toString(TraceKind kind);
// Whether events of this kind are of one action (compute, post, wait): they carry it.
bool hasAction(TraceKind kind);

struct TraceEvent {
  TraceKind kind = TraceKind::kCompute;
  Action action;  // kCompute, kPost, kWait: which action; otherwise unused
  int64_t step = 0;
  int64_t start_ns = 0;  // this rank's steady clock
  int64_t end_ns = 0;
};

// The event's name in a trace: the action in its text form ("1F3", "0SEND_F2"), prefixed
// "wait " for a wait; "gradient sync", "all-reduce", "optimizer", "tp all-reduce",
// "recompute" for the others.
std::string eventName(const TraceEvent& event);

class TraceRecorder {
 public:
  // Nanoseconds on this rank's steady clock.
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // The step the following events belong to (0-based).
  void beginStep(int64_t step) { step_ = step; }
  void add(TraceKind kind, const Action& action, int64_t start_ns, int64_t end_ns);
  void add(TraceKind kind, int64_t start_ns, int64_t end_ns) {
    add(kind, Action{}, start_ns, end_ns);
  }

  const std::vector<TraceEvent>& events() const { return events_; }
  // Events past kMaxEvents are dropped (a run of millions of actions), and counted.
  int64_t dropped() const { return dropped_; }

  // About 40 bytes each in memory and 200 in the file: 80 MB and a 400 MB file at most.
  static constexpr size_t kMaxEvents = size_t{1} << 21;

 private:
  std::vector<TraceEvent> events_;
  int64_t step_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace ppstage
