// Summary statistics over repeated measurements (steps, probe round trips, profile runs).
#pragma once

#include <vector>

namespace ppstage {

// Median of `values` (0 for none): the mean of the two middle values for an even count.
double median(std::vector<double> values);

// The median over repetitions of the slowest of several ranks: `times[r][i]` is rank r's
// time in repetition i (every rank the same count). What a step that waits for every rank
// sees, where the slowest of the ranks' medians would miss that a different rank is slow
// each time.
double medianOfSlowest(const std::vector<std::vector<double>>& times);

}  // namespace ppstage
