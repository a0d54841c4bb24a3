// See include/ppstage/core/interrupt.h, Note [Abandoning a step].
#include "ppstage/core/interrupt.h"

#include <atomic>

namespace ppstage {
namespace {

std::atomic<bool> g_requested{false};
std::atomic<bool> g_interruptible{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

}  // namespace

void requestInterrupt() noexcept { g_requested.store(true); }

void clearInterrupt() noexcept { g_requested.store(false); }

bool interruptRequested() noexcept { return g_requested.load(); }

bool interruptible() noexcept { return g_interruptible.load(); }

bool interruptPending() noexcept { return g_interruptible.load() && g_requested.load(); }

void throwIfInterrupted() {
  if (interruptPending()) throw StepInterrupted();
}

InterruptibleScope::InterruptibleScope() noexcept { g_interruptible.store(true); }

InterruptibleScope::~InterruptibleScope() { g_interruptible.store(false); }

}  // namespace ppstage
