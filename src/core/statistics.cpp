// See include/ppstage/core/statistics.h.
#include "ppstage/core/statistics.h"

#include <algorithm>

namespace ppstage {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double medianOfSlowest(const std::vector<std::vector<double>>& times) {
  std::vector<double> slowest;
  for (const std::vector<double>& rank : times) {
    if (slowest.size() < rank.size()) slowest.resize(rank.size(), 0.0);
    for (size_t i = 0; i < rank.size(); ++i) slowest[i] = std::max(slowest[i], rank[i]);
  }
  return median(slowest);
}

}  // namespace ppstage
