// See action_timer.h.
#include "action_timer.h"

#include <utility>
#include <vector>

#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"

#ifdef PPSTAGE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace ppstage {

struct ActionTimer::Events {
#ifdef PPSTAGE_WITH_CUDA
  // Recorded in the step's order; reused from step to step (creating an event costs).
  std::vector<at::cuda::CUDAEvent> pool;
  size_t used = 0;
  // (start event, end event, where the seconds go) of each action of the step.
  std::vector<std::pair<std::pair<size_t, size_t>, double*>> actions;

  size_t record() {
    if (used == pool.size()) pool.emplace_back(cudaEventDefault);  // timing enabled
    pool[used].record(at::cuda::getCurrentCUDAStream());
    return used++;
  }
#endif
};

ActionTimer::ActionTimer(const c10::Device& device)
    : device_(device), events_(std::make_unique<Events>()) {
#ifndef PPSTAGE_WITH_CUDA
  PPSTAGE_INTERNAL_ASSERT(!device.is_cuda(), "a CUDA device in a build without CUDA");
#endif
}

ActionTimer::~ActionTimer() = default;

ActionTimer::Start ActionTimer::start() {
  Start start{Clock::now(), -1};
#ifdef PPSTAGE_WITH_CUDA
  if (device_.is_cuda()) start.event = static_cast<int>(events_->record());
#endif
  return start;
}

void ActionTimer::stop(const Start& start, double* seconds) {
#ifdef PPSTAGE_WITH_CUDA
  if (start.event >= 0) {
    const size_t end = events_->record();
    events_->actions.push_back({{static_cast<size_t>(start.event), end}, seconds});
    return;
  }
#endif
  *seconds += secondsSince(start.host);
}

void ActionTimer::finish() {
#ifdef PPSTAGE_WITH_CUDA
  for (const auto& [events, seconds] : events_->actions) {
    at::cuda::CUDAEvent& end = events_->pool[events.second];
    end.synchronize();
    *seconds += events_->pool[events.first].elapsed_time(end) / 1000.0;
  }
  events_->actions.clear();
  events_->used = 0;
#endif
}

}  // namespace ppstage
