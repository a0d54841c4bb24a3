// Wall time of one piece of work, as every measurement here takes it: the steady clock.
#pragma once

#include <chrono>

namespace ppstage {

// Seconds from `start` to `end`, on the steady clock.
inline double secondsBetween(std::chrono::steady_clock::time_point start,
                             std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Seconds from `start` to now, on the steady clock.
inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return secondsBetween(start, std::chrono::steady_clock::now());
}

}  // namespace ppstage
