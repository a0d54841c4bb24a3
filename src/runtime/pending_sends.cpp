// See src/runtime/pending_sends.h.
#include "pending_sends.h"

#include <algorithm>

#include "ppstage/core/clock.h"
#include "ppstage/observe/trace.h"

namespace ppstage {

void PendingSends::add(const Action& send, std::shared_ptr<Work> work,
                       std::chrono::milliseconds timeout) {
  dropCompleted(timeout);
  sends_.push_back({send, std::move(work)});
}

void PendingSends::dropCompleted(std::chrono::milliseconds timeout) {
  const auto completed = [timeout](Pending& p) {
    if (!p.work->isCompleted()) return false;
    p.work->wait(timeout);  // returns at once; throws where the send failed
    return true;
  };
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(), completed), sends_.end());
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
