// The sends a step has posted and not yet seen complete. A send's tensor lives as long as
// its Work: kept until the step's end, every send of a micro-batch stayed alive through the
// whole step, a boundary's bytes per micro-batch and cut (a rank of a pipeline of 8 stages
// over 2 ranks held 0.9 MB more per micro-batch of gpt-small, 14 MB by the step's end, all
// of it sent long before). So each new send first lets go of those that completed, and the
// step's end waits for the rest.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "ppstage/comm/communicator.h"
#include "ppstage/schedule/action.h"
#include "ppstage/schedule/per_kind.h"

namespace ppstage {

class TraceRecorder;

class PendingSends {
 public:
  // Keeps `work`, posted by the SEND `send`, then drops every send that completed
  // (dropCompleted). `to_step_end`: a send of a receive buffer's memory (a value the stage
  // passes on unchanged) stays to the step's end, as the buffer's pool expects
  // (runtime/receive_buffers.h: one given back still in use comes back at the step's end;
  // let go earlier, when it did depended on timing, and so did the pool's allocations).
  void add(const Action& send, std::shared_ptr<Work> work, std::chrono::milliseconds timeout,
           bool to_step_end = false);

  // Drops the sends that completed, but those kept to the step's end. A failed one throws
  // CommError here, as its wait would.
  void dropCompleted(std::chrono::milliseconds timeout);

  // Waits for every send left, one wait per SEND action, added to `wait_s` and, with a
  // `trace`, traced. Throws CommError for a send that failed or did not finish in `timeout`.
  void waitAll(std::chrono::milliseconds timeout, PerTransfer<double>& wait_s,
               TraceRecorder* trace);

  size_t size() const { return sends_.size(); }

 private:
  struct Pending {
    Action action;
    std::shared_ptr<Work> work;
    bool to_step_end = false;
  };
  std::vector<Pending> sends_;
};

}  // namespace ppstage
