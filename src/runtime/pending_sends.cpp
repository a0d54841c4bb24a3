// See src/runtime/pending_sends.h.
#include "pending_sends.h"

#include <cstddef>

#include "ppstage/core/clock.h"
#include "ppstage/observe/trace.h"

namespace ppstage {

void PendingSends::add(const Action& send, std::shared_ptr<Work> work,
                       std::chrono::milliseconds timeout, bool to_step_end) {
  sends_.push_back({send, std::move(work), to_step_end});  // first: a failure loses nothing
  dropCompleted(timeout);
}

void PendingSends::dropCompleted(std::chrono::milliseconds timeout) {
  for (size_t i = 0; i < sends_.size();) {
    if (sends_[i].to_step_end || !sends_[i].work->isCompleted()) {
      ++i;
      continue;
    }
    const std::shared_ptr<Work> done = std::move(sends_[i].work);
    sends_.erase(sends_.begin() + static_cast<std::ptrdiff_t>(i));
    done->wait(timeout);  // returns at once; throws where the send failed
  }
}

void PendingSends::waitAll(std::chrono::milliseconds timeout, PerTransfer<double>& wait_s,
                           TraceRecorder* trace) {
  using Clock = std::chrono::steady_clock;
  for (size_t i = 0; i < sends_.size();) {
    const Action action = sends_[i].action;
    const int64_t start = trace != nullptr ? TraceRecorder::now() : 0;
    const auto begin = Clock::now();
    for (; i < sends_.size() && sends_[i].action == action; ++i) {
      sends_[i].work->wait(timeout);
    }
    wait_s[action.kind] += secondsSince(begin);
    if (trace != nullptr) trace->add(TraceKind::kWait, action, start, TraceRecorder::now());
  }
  sends_.clear();
}

}  // namespace ppstage
