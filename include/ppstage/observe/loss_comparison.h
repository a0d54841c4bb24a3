// Two runs' per-step losses side by side, the one comparison compare-runs and
// compare-compile both make.
#pragma once

#include <cstddef>
#include <vector>

namespace ppstage {

struct LossDifference {
  size_t steps = 0;          // steps both runs have
  double max_rel_diff = 0;   // |candidate - reference| / max(|reference|, 1e-12), the largest
  long long worst_step = 0;  // the 0-based global step of max_rel_diff (the first shared one
                             // when all are equal)
};

// The losses of the global steps both runs have: `reference` covers steps
// [reference_first, reference_first + reference.size()), and so does `candidate` from
// `candidate_first` (a resumed run starts later, a shorter run ends earlier). Two equal
// losses differ by 0, NaN in both included (a step both skipped); a loss that is NaN or
// infinite in one run only differs by infinity, so no tolerance passes it. Throws
// ppstage::Error when the runs share no step.
LossDifference compareLosses(const std::vector<double>& reference, long long reference_first,
                             const std::vector<double>& candidate, long long candidate_first);

}  // namespace ppstage
