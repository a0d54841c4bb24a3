// Summary statistics over repeated measurements (steps, probe round trips, profile runs).
#pragma once

#include <vector>

namespace ppstage {

// Median of `values` (0 for none): the mean of the two middle values for an even count.
double median(std::vector<double> values);

}  // namespace ppstage
