// Abandoning the step in flight when the job is asked to stop (train/stop_signal.h).
//
// Note [Abandoning a step]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// On Ctrl-C, Open MPI's mpirun passes SIGTERM on to the ranks and SIGKILLs them about a
// second later (odls_base_sigkill_timeout, default 1 s): a step of several seconds cannot
// finish first. So a signal asks for an interrupt, and while a step's actions and gradient
// sync run (an InterruptibleScope), every place that waits (a communicator's wait, the
// executor between actions) throws StepInterrupted once it is asked. The step is abandoned
// before its optimizer step: the parameters and optimizer state are still those of the
// last completed step, which is what the save keeps. Every rank then enters the step's
// all-reduce anyway, saying it abandoned, and no rank applies the step (the all-reduce is
// where a step commits: no rank abandons after entering it, and every rank learns there
// whether any abandoned). A rank whose waits are on a peer that abandoned learns of it from
// a stop notice (comm/failure_channel.h) where no signal reached it. Ops themselves are
// not interrupted: a single op longer than the grace still runs to its end.
#pragma once

#include <exception>

namespace ppstage {

// The step was abandoned: thrown where an interrupt was asked inside an InterruptibleScope.
// Not a ppstage::Error: nothing failed.
class StepInterrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "the step was abandoned to stop"; }
};

// Asks for an interrupt (async-signal-safe: one lock-free atomic store); forgets one
// (a new run's StopSignal does).
void requestInterrupt() noexcept;
void clearInterrupt() noexcept;

// Whether an interrupt was asked; whether an InterruptibleScope lives; both.
bool interruptRequested() noexcept;
bool interruptible() noexcept;
bool interruptPending() noexcept;

// Throws StepInterrupted where interruptPending().
void throwIfInterrupted();

// While one lives, interrupts are pending once asked (process-wide; the training thread
// makes one around the part of a step that may be abandoned).
class InterruptibleScope {
 public:
  InterruptibleScope() noexcept;
  ~InterruptibleScope();
  InterruptibleScope(const InterruptibleScope&) = delete;
  InterruptibleScope& operator=(const InterruptibleScope&) = delete;
};

}  // namespace ppstage
