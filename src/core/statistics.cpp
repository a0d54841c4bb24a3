// See include/ppstage/core/statistics.h.
#include "ppstage/core/statistics.h"

#include <algorithm>

#include "ppstage/core/error.h"

namespace ppstage {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double medianOfSlowest(const std::vector<std::vector<double>>& times) {
  if (times.empty()) return 0;
  std::vector<double> slowest = times.front();
  for (size_t r = 1; r < times.size(); ++r) {
    PPSTAGE_INTERNAL_ASSERT(times[r].size() == slowest.size(), "rank ", r, " timed ",
                            times[r].size(), " repetitions where rank 0 timed ", slowest.size());
    for (size_t i = 0; i < slowest.size(); ++i) slowest[i] = std::max(slowest[i], times[r][i]);
  }
  return median(slowest);
}

}  // namespace ppstage
