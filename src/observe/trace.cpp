// See include/ppstage/observe/trace.h.
#include "ppstage/observe/trace.h"

namespace ppstage {

const char* toString(TraceKind kind) {
  switch (kind) {
    case TraceKind::kCompute: return "compute";
    case TraceKind::kPost: return "post";
    case TraceKind::kWait: return "wait";
    case TraceKind::kGradientSync: return "gradient_sync";
    case TraceKind::kAllReduce: return "all_reduce";
    case TraceKind::kOptimizer: return "optimizer";
    case TraceKind::kTensorParallel: return "tp";
    case TraceKind::kRecompute: return "recompute";
  }
  return "?";
}

bool hasAction(TraceKind kind) {
  return kind == TraceKind::kCompute || kind == TraceKind::kPost || kind == TraceKind::kWait;
}

std::string eventName(const TraceEvent& event) {
  switch (event.kind) {
    case TraceKind::kCompute:
    case TraceKind::kPost: return toString(event.action);
    case TraceKind::kWait: return "wait " + toString(event.action);
    case TraceKind::kGradientSync: return "gradient sync";
    case TraceKind::kAllReduce: return "all-reduce";
    case TraceKind::kOptimizer: return "optimizer";
    case TraceKind::kTensorParallel: return "tp all-reduce";
    case TraceKind::kRecompute: return "recompute";
  }
  return "?";
}

void TraceRecorder::add(TraceKind kind, const Action& action, int64_t start_ns, int64_t end_ns) {
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  if (events_.empty()) events_.reserve(4096);
  events_.push_back({kind, action, step_, start_ns, end_ns});
}

}  // namespace ppstage
