// See include/ppstage/observe/loss_comparison.h.
#include "ppstage/observe/loss_comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

double relativeDifference(double candidate, double reference) {
  if (candidate == reference || (std::isnan(candidate) && std::isnan(reference))) return 0;
  if (!std::isfinite(candidate) || !std::isfinite(reference)) {
    return std::numeric_limits<double>::infinity();
  }
  return std::abs(candidate - reference) / std::max(std::abs(reference), 1e-12);
}

}  // namespace

LossDifference compareLosses(const std::vector<double>& reference, long long reference_first,
                             const std::vector<double>& candidate, long long candidate_first) {
  const long long reference_end = reference_first + static_cast<long long>(reference.size());
  const long long candidate_end = candidate_first + static_cast<long long>(candidate.size());
  const long long begin = std::max(reference_first, candidate_first);
  const long long end = std::min(reference_end, candidate_end);
  PPSTAGE_CHECK(begin < end, "the runs share no step: the reference ran steps ",
                reference_first + 1, "-", reference_end, ", the candidate ", candidate_first + 1,
                "-", candidate_end);
  LossDifference difference;
  difference.steps = static_cast<size_t>(end - begin);
  difference.worst_step = begin;
  for (long long step = begin; step < end; ++step) {
    const double d = relativeDifference(candidate[static_cast<size_t>(step - candidate_first)],
                                        reference[static_cast<size_t>(step - reference_first)]);
    if (d > difference.max_rel_diff) {
      difference.max_rel_diff = d;
      difference.worst_step = step;
    }
  }
  return difference;
}

}  // namespace ppstage
