// Wall time of one piece of work, as every measurement here takes it: the steady clock.
#pragma once

#include <chrono>

namespace ppstage {

// Seconds from `start` to now, on the steady clock.
inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ppstage
