// ActionTimer: the seconds a rank's compute actions take where they run. For CPU tensors
// the host's clock around the action is its time. For a GPU's, the host only queues the
// kernels, so its clock measures the launches: there a pair of CUDA events on the current
// stream brackets the action, and the step's seconds are read once, when it ends (one
// sync), into the places the actions named.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <memory>

namespace ppstage {

class ActionTimer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Start {
    Clock::time_point host;  // also what the trace records
    int event = -1;          // a GPU action's start event
  };

  explicit ActionTimer(const c10::Device& device);
  ~ActionTimer();
  ActionTimer(const ActionTimer&) = delete;
  ActionTimer& operator=(const ActionTimer&) = delete;

  Start start();
  // Ends the action begun at `start`: its seconds are added to `*seconds`, now on the CPU,
  // at finish() on a GPU (so `seconds` must stay valid until then).
  void stop(const Start& start, double* seconds);
  // Adds every GPU action's seconds since the last finish(), waiting for the last to end.
  void finish();

  struct Events;  // the CUDA events of the step's actions

 private:
  c10::Device device_;
  std::unique_ptr<Events> events_;
};

}  // namespace ppstage
