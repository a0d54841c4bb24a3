// See src/plan/recompute_fit.h.
#include "recompute_fit.h"

#include <algorithm>
#include <limits>
#include <set>

namespace ppstage {

namespace {

// Per stage of the cut `starts`, its units that hold blocks, in order.
std::vector<std::vector<size_t>> blockHoldersOf(const CostProfile& profile,
                                                const std::vector<size_t>& starts) {
  std::vector<std::vector<size_t>> out(starts.size() + 1);
  size_t s = 0;
  for (size_t u = 0; u < profile.units.size(); ++u) {
    while (s < starts.size() && u >= starts[s]) ++s;
    if (!profile.units[u].blocks.empty()) out[s].push_back(u);
  }
  return out;
}

// The blocks (distinct module paths) of each stage's first `units[s]` holders.
std::vector<int> blocksOf(const CostProfile& profile,
                          const std::vector<std::vector<size_t>>& holders,
                          const std::vector<int>& units) {
  std::vector<int> out;
  for (size_t s = 0; s < holders.size(); ++s) {
    std::set<std::string> blocks;
    for (int k = 0; k < units[s]; ++k) {
      const UnitCost& unit = profile.units[holders[s][static_cast<size_t>(k)]];
      blocks.insert(unit.blocks.begin(), unit.blocks.end());
    }
    out.push_back(static_cast<int>(blocks.size()));
  }
  return out;
}

// One candidate's search for what to recompute under one policy.
class RecomputeFit {
 public:
  RecomputeFit(const CostProfile& profile, const PipelineSchedule& schedule,
               const Topology& pipeline, double budget, const PlanCandidate& c,
               RecomputePolicy policy)
      : profile_(profile),
        schedule_(schedule),
        pipeline_(pipeline),
        budget_(budget),
        plain_(c),
        size_(static_cast<double>(c.microbatch_size)),
        splits_(splitsBackward(schedule)),
        holders_(blockHoldersOf(profile, c.stage_starts)),
        plain_costs_(stageCostsOf(profile, c.stage_starts, size_)) {
    choice_.policy = policy;
    choice_.units.assign(holders_.size(), 0);
  }

  // The candidate with the fewest units recomputed that the greedy search found to fit, or,
  // where none fits, with every unit holding blocks recomputed.
  PlanCandidate run() {
    PlanCandidate trial = plain_;
    while (addUnits(trial)) {
      trial = predicted();
      if (trial.peak_bytes <= budget_) return trial;
    }
    for (size_t s = 0; s < holders_.size(); ++s) {
      choice_.units[s] = static_cast<int>(holders_[s].size());
    }
    return predicted();
  }

 private:
  // `plain_` simulated again with `choice_`'s costs.
  PlanCandidate predicted() {
    const StageCosts costs = stageCostsOf(profile_, plain_.stage_starts, size_, &choice_);
    PlanCandidate c = plain_;
    fillPrediction(profile_, costs, pipeline_, schedule_,
                   simulateSchedule(schedule_.request, schedule_.ranks,
                                    actionCostsOf(profile_, costs, plain_)),
                   c);
    c.recompute = choice_;
    c.recompute.blocks = blocksOf(profile_, holders_, choice_.units);
    for (size_t s = 0; s < holders_.size(); ++s) {
      c.recompute.plain_bytes.push_back(aliveBytes(plain_costs_, static_cast<int>(s), splits_));
      c.recompute.kept_bytes.push_back(aliveBytes(costs, static_cast<int>(s), splits_));
    }
    return c;
  }

  // Adds, on every rank over the budget in `c`'s prediction, its stages' next units in
  // order of added seconds per byte saved until their estimated savings cover the excess.
  // A unit saves its stage's peak in-flight micro-batches times the activations it keeps
  // less (what waits between I and W stays: W needs it). One that saves nothing is still
  // taken where nothing else is left, to reach the units after it. False where a rank over
  // the budget has no unit left.
  bool addUnits(const PlanCandidate& c) {
    const StageCosts costs = stageCostsOf(profile_, plain_.stage_starts, size_, &choice_);
    const std::vector<double> peaks = rankPeakBytes(profile_, costs, pipeline_, schedule_, plain_);
    bool added = false;
    for (int r = 0; r < pipeline_.ppSize(); ++r) {
      for (double excess = peaks[r] - budget_; excess > 0;) {
        const Next next = bestNext(c, r);
        if (next.stage < 0) return false;
        ++choice_.units[next.stage];
        excess -= next.saving;
        added = true;
      }
    }
    return added;
  }

  // The unit to recompute next on rank `r`: the stage whose next unit holding blocks adds
  // the fewest seconds per byte saved; stage -1 where none is left.
  struct Next {
    int stage = -1;
    double saving = 0;
  };
  Next bestNext(const PlanCandidate& c, int r) const {
    const ActionKind backward = splits_ ? ActionKind::kBackwardInput : ActionKind::kBackward;
    Next best;
    double best_ratio = std::numeric_limits<double>::infinity();
    for (int s : pipeline_.stagesOf(r)) {
      const size_t next = static_cast<size_t>(choice_.units[s]);
      if (next >= holders_[s].size()) continue;
      const size_t u = holders_[s][next];
      const double saving =
          std::max(0.0, c.inflight.at(s) * (profile_.activationBytesOf(u, size_) -
                                            profile_.activationBytesOf(u, size_, choice_.policy)));
      const double added_s =
          plain_.microbatches * (profile_.secondsOf(u, backward, size_, choice_.policy) -
                                 profile_.secondsOf(u, backward, size_));
      const double ratio =
          saving > 0 ? std::max(added_s, 0.0) / saving : std::numeric_limits<double>::max();
      if (best.stage < 0 || ratio < best_ratio) {
        best = {s, saving};
        best_ratio = ratio;
      }
    }
    return best;
  }

  const CostProfile& profile_;
  const PipelineSchedule& schedule_;
  const Topology& pipeline_;
  double budget_;
  const PlanCandidate& plain_;
  double size_;
  bool splits_;
  std::vector<std::vector<size_t>> holders_;
  StageCosts plain_costs_;  // nothing recomputed
  PlannedRecompute choice_;
};

}  // namespace

PlanCandidate fitByRecomputing(const CostProfile& profile, const PipelineSchedule& schedule,
                               const Topology& pipeline, double budget, const PlanCandidate& c) {
  PlanCandidate fastest, smallest = c;
  bool fits = false;
  for (const RecomputePolicy policy : profile.recomputePolicies()) {
    const PlanCandidate fitted = RecomputeFit(profile, schedule, pipeline, budget, c, policy).run();
    if (fitted.peak_bytes <= budget) {
      if (!fits || fitted.step_s < fastest.step_s) fastest = fitted;
      fits = true;
    } else if (fitted.peak_bytes < smallest.peak_bytes) {
      smallest = fitted;
    }
  }
  return fits ? fastest : smallest;
}

}  // namespace ppstage
