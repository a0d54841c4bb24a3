// See include/ppstage/plan/planner.h, Note [Planning a pipeline].
#include "ppstage/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ppstage/core/error.h"
#include "ppstage/core/pipeline_limits.h"
#include "ppstage/core/topology.h"
#include "ppstage/core/units.h"
#include "ppstage/plan/shared_cores.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/split/stage_partition.h"
#include "recompute_fit.h"
#include "stage_costs.h"

namespace ppstage {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The order of the plan: by predicted step, where steps within half a percent count as
// equal (the prediction is not finer than that), and then by peak memory (GPipe and 1F1B
// of one layout predict the same step; the one that holds less in flight runs better).
bool ranksBefore(const PlanCandidate& a, const PlanCandidate& b) {
  constexpr double kStepResolution = 1.005;
  const auto bucket = [](double step) {
    return std::llround(std::log(std::max(step, 1e-12)) / std::log(kStepResolution));
  };
  const long long a_bucket = bucket(a.step_s), b_bucket = bucket(b.step_s);
  if (a_bucket != b_bucket) return a_bucket < b_bucket;
  return a.peak_bytes < b.peak_bytes;
}

// Candidates of the same layout, cut and micro-batches whose predictions are equal, step and
// peak, are listed once, under the schedule found first (the search's order is stable):
// schedules that order one layout's actions alike (GPipe and 1F1B of one stage per rank and
// one micro-batch) predict exactly alike.
bool sameRun(const PlanCandidate& a, const PlanCandidate& b) {
  return a.dp == b.dp && a.pp == b.pp && a.stages_per_rank == b.stages_per_rank &&
         a.placement == b.placement && a.rank_order == b.rank_order &&
         a.microbatches == b.microbatches && a.stage_starts == b.stage_starts &&
         a.step_s == b.step_s && a.peak_bytes == b.peak_bytes;
}

// The exact min-max cut of `unit_costs` into `stages` parts, each starting at one of
// possibleStarts: the first unit of every stage after the first.
std::vector<size_t> balancedStarts(const CostProfile& profile,
                                   const std::vector<double>& unit_costs, int stages) {
  const std::vector<size_t> possible = possibleStarts(profile);
  std::vector<double> runs;  // the units from one possible start to the next, summed
  for (size_t i = 0; i < possible.size(); ++i) {
    const size_t end = i + 1 < possible.size() ? possible[i + 1] : unit_costs.size();
    double sum = 0;
    for (size_t u = possible[i]; u < end; ++u) sum += unit_costs[u];
    runs.push_back(sum);
  }
  std::vector<size_t> starts;
  for (size_t run : balancedPartition(runs, static_cast<size_t>(stages))) {
    starts.push_back(possible[run]);
  }
  return starts;
}

// The min-max cut of the units' F + B seconds at `size` into `stages` parts.
std::vector<size_t> balancedCut(const CostProfile& profile, int stages, double size) {
  std::vector<double> seconds;
  for (size_t u = 0; u < profile.units.size(); ++u) {
    seconds.push_back(profile.secondsOf(u, ActionKind::kForward, size) +
                      profile.secondsOf(u, ActionKind::kBackward, size));
  }
  return balancedStarts(profile, seconds, stages);
}

// Bounds that hold for every cut of `c`'s layout, so that refining a cut (refineCut) can
// never beat them: the step is at least the average rank's compute (F, and the cheaper of
// B and I + W, of every unit for every micro-batch, over the pipeline ranks) and one
// micro-batch's way through every unit and back, plus the optimizer and all-reduce of the
// average rank's elements (the optimizer's sharded where dp > 1); the peak at least the
// average rank's parameters and state, sharded or not whichever is less, with one
// micro-batch in flight on every stage, each unit keeping what it keeps recomputed under
// the policy that keeps least (Note [Recomputation in the plan]).
struct Bounds {
  double step = 0;
  double memory = 0;
};

// What unit `u` keeps of one micro-batch of `size` under the policy that keeps least.
double smallestKeptBytes(const CostProfile& profile, size_t u, double size) {
  double least = profile.activationBytesOf(u, size);
  for (const RecomputePolicy policy : profile.recomputePolicies()) {
    least = std::min(least, profile.activationBytesOf(u, size, policy));
  }
  return least;
}

Bounds boundsOf(const CostProfile& profile, const PlanCandidate& c) {
  const double size = static_cast<double>(c.microbatch_size);
  double work = 0, path = 0, elements = 0, resident = 0;
  const double state =
      std::min(profile.stateBytesPerElement(c.dp, false), profile.stateBytesPerElement(c.dp, true));
  for (size_t u = 0; u < profile.units.size(); ++u) {
    const auto cost = [&](ActionKind kind) { return profile.secondsOf(u, kind, size); };
    const double forward = cost(ActionKind::kForward);
    const double backward = cost(ActionKind::kBackward);
    work += forward + std::min(backward, cost(ActionKind::kBackwardInput) +
                                             cost(ActionKind::kBackwardWeight));
    path += forward + std::min(backward, cost(ActionKind::kBackwardInput));
    const UnitCost& unit = profile.units[u];
    elements += static_cast<double>(unit.trainable_elements);
    resident += static_cast<double>(unit.param_bytes) +
                state * static_cast<double>(unit.trainable_elements) +
                smallestKeptBytes(profile, u, size);
  }
  const double ranks = c.pp;
  // Where ranks share cores, a rank computing alone runs up to 1 / the measured share as
  // fast as measured (Note [Ranks that share cores]).
  const double fastest = c.shared_cores.empty() ? 1.0 : c.shared_cores.measured_share;
  const double tail =
      fastest * profile.optimizerSeconds(elements / ranks, c.dp, /*shard_optimizer=*/true) +
      profile.allReduceSeconds(4.0 * elements / ranks, c.dp, c.across_hosts.data_parallel);
  // The mean rank's work and tail; where the tails run inside the step, the first stage's
  // tail after the path may be below the mean.
  const double step =
      c.shared_cores.empty()
          ? std::max(c.microbatches * work / ranks, path) + tail
          : std::max(fastest * c.microbatches * work / ranks + tail, fastest * path);
  return {step, resident / ranks};
}

ScheduleOptions scheduleOptionsOf(const CostProfile& profile, const PlanCandidate& c,
                                  const StageCosts& costs) {
  ScheduleOptions options;
  options.schedule = c.schedule;
  options.stages = c.stages();
  options.microbatches = c.microbatches;
  options.stages_per_rank = c.stages_per_rank;
  options.placement = c.placement;
  options.costs = actionCostsOf(profile, costs, c);
  return options;
}

// Moves each boundary of `c`'s cut to the possible start either side while the simulated step falls
// and the peak stays within `budget` (0: none) (Note [Planning a pipeline]); `schedule` is c's,
// built once.
void refineCut(const CostProfile& profile, const PipelineSchedule& schedule,
               const Topology& pipeline, double budget, PlanCandidate& c) {
  constexpr int kPasses = 2;
  const double size = static_cast<double>(c.microbatch_size);
  const std::vector<size_t> possible = possibleStarts(profile);
  for (int pass = 0; pass < kPasses; ++pass) {
    bool moved = false;
    for (size_t k = 0; k < c.stage_starts.size(); ++k) {
      for (const int step : {-1, 1}) {
        std::vector<size_t> starts = c.stage_starts;
        // The possible start next to this one, between its neighbours.
        const auto at = std::find(possible.begin(), possible.end(), starts[k]);
        if (step < 0 ? at - possible.begin() <= 1 : at + 1 >= possible.end()) continue;
        const size_t moved_to = *(at + step);
        if ((k > 0 && moved_to <= starts[k - 1]) ||
            (k + 1 < starts.size() && moved_to >= starts[k + 1])) {
          continue;
        }
        starts[k] = moved_to;
        const StageCosts costs = stageCostsOf(profile, starts, size);
        const SimulationResult simulation =
            simulateSchedule(schedule.request, schedule.ranks, actionCostsOf(profile, costs, c));
        PlanCandidate trial = c;
        trial.stage_starts = starts;
        fillPrediction(profile, costs, pipeline, schedule, simulation, trial);
        if (trial.step_s < c.step_s * (1 - 1e-9) && (budget <= 0 || trial.peak_bytes <= budget)) {
          c = trial;
          moved = true;
        }
      }
    }
    if (!moved) return;
  }
}

// Candidates with more stages keep their balanced cut: refining simulates the schedule
// again for every boundary moved.
constexpr int kMostStagesRefined = 16;

// Whether `sharded` is the better of `c`'s two predictions (Note [Sharding in the plan]):
// it fits `budget` (0: none) where `plain` does not; both fitting, it is faster, or as fast
// and smaller; neither fitting, it is smaller (less to recompute).
bool shardingWins(const PlanCandidate& sharded, const PlanCandidate& plain, double budget) {
  const auto fits = [&](const PlanCandidate& c) { return budget <= 0 || c.peak_bytes <= budget; };
  if (fits(sharded) != fits(plain)) return fits(sharded);
  if (!fits(sharded) || sharded.step_s == plain.step_s) {
    return sharded.peak_bytes < plain.peak_bytes;
  }
  return sharded.step_s < plain.step_s;
}

// What a simulateAndRefine may choose beside the cut: the planner's search chooses, a run
// that gives the rest of its configuration (cutFor) does not.
enum class Choosing { kCut, kCutAndMemory };

// `c` simulated under its cut's `costs`, then, choosing memory, its optimizer sharded where
// that wins (Note [Sharding in the plan]), then its cut refined (refineCut) where it has 2 to
// kMostStagesRefined stages, then, over `budget` and choosing memory, recomputation fitted
// (Note [Recomputation in the plan]). Throws ppstage::Error when its schedule refuses it.
PlanCandidate simulateAndRefine(const CostProfile& profile, PlanCandidate c,
                                const StageCosts& costs, const ScheduleRegistry& registry,
                                double budget, Choosing choosing = Choosing::kCutAndMemory) {
  const PipelineSchedule schedule = buildSchedule(registry, scheduleOptionsOf(profile, c, costs));
  const Topology pipeline = Topology::forPipeline(c.stages(), c.stages_per_rank, c.placement);
  fillPrediction(profile, costs, pipeline, schedule, schedule.simulation, c);
  const bool memory = choosing == Choosing::kCutAndMemory;
  if (memory && c.dp > 1 && !c.shard_optimizer) {
    PlanCandidate sharded = c;
    sharded.shard_optimizer = true;
    fillPrediction(profile, costs, pipeline, schedule, schedule.simulation, sharded);
    if (shardingWins(sharded, c, budget)) c = sharded;
  }
  if (c.stages() >= 2 && c.stages() <= kMostStagesRefined) {
    refineCut(profile, schedule, pipeline, budget, c);
  }
  if (memory && budget > 0 && c.peak_bytes > budget) {
    return fitByRecomputing(profile, schedule, pipeline, budget, c);
  }
  return c;
}

// A candidate before simulation: its layout, its stages' costs and its bounds.
struct Pending {
  PlanCandidate candidate;
  std::shared_ptr<const StageCosts> costs;
  double step_bound = 0;
  double memory_bound = 0;
};

// The divisors of n up to `at_most`, ascending.
std::vector<int> divisorsOf(int64_t n, int64_t at_most) {
  std::vector<int> out;
  for (int64_t d = 1; d <= std::min(n, at_most); ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

// What of `c`'s traffic crosses between the request's hosts (none on one host).
HostCrossings crossingsOf(const PlanRequest& request, const PlanCandidate& c) {
  if (request.host_of_rank.empty()) return {};
  const Topology job = Topology::forJob(request.ranks * request.tp, c.dp, c.stages(),
                                        c.stages_per_rank, c.placement, request.tp, c.rank_order);
  return hostCrossings(job.withHosts(request.host_of_rank));
}

// `c`'s pipeline ranks on the request's machines (Note [Ranks that share cores]).
SharedCores sharedCoresIn(const CostProfile& profile, const PlanRequest& request,
                          const PlanCandidate& c) {
  if (request.cpus.empty()) return {};
  const Topology job = Topology::forJob(request.ranks * request.tp, c.dp, c.stages(),
                                        c.stages_per_rank, c.placement, request.tp, c.rank_order);
  return sharedCoresOf(job, request.cpus, profile.core_share);
}

// The placements a layout of `stages_per_rank` can take.
std::vector<Placement> placementsFor(int stages_per_rank) {
  if (stages_per_rank == 2) return {Placement::kLoop, Placement::kV};
  return {Placement::kLoop};
}

class Enumerator {
 public:
  Enumerator(const CostProfile& profile, const PlanRequest& request)
      : profile_(profile), request_(request), hosts_(hostCountOf(request.host_of_rank)) {}

  // Every candidate of Note [Planning a pipeline], with its costs and bounds.
  std::vector<Pending> all() {
    std::vector<Pending> out;
    const int units = static_cast<int>(possibleStarts(profile_).size());
    for (int pp : divisorsOf(request_.ranks, units)) {
      const int dp = request_.ranks / pp;
      if (profile_.batch_size % dp != 0) continue;
      const int max_per_rank = pp == 1 ? 1 : request_.max_stages_per_rank;
      for (int per_rank = 1; per_rank <= max_per_rank; ++per_rank) {
        if (pp * per_rank > std::min(units, kMaxStages)) break;
        for (Placement placement : placementsFor(per_rank)) {
          for (RankOrder order : ordersFor(dp, pp)) {
            addLayout(dp, pp, per_rank, placement, order, out);
          }
        }
      }
    }
    return out;
  }

 private:
  // Both rank orders where the ranks are on several hosts, the profile knows the links
  // between them and the layout has replicas and a pipeline (Note [Links in the plan]);
  // elsewhere both predict the same links (where hosts are one machine's namespaces, the
  // orders' shared cores could differ; the plan tries one).
  std::vector<RankOrder> ordersFor(int dp, int pp) const {
    if (hosts_ > 1 && profile_.hasHostLinks() && dp > 1 && pp > 1) {
      return {RankOrder::kReplicaMajor, RankOrder::kPipelineMajor};
    }
    return {RankOrder::kReplicaMajor};
  }

  void addLayout(int dp, int pp, int per_rank, Placement placement, RankOrder order,
                 std::vector<Pending>& out) {
    const int64_t local_batch = profile_.batch_size / dp;
    for (int microbatches : divisorsOf(local_batch, kMaxMicrobatches)) {
      // Below the smallest size measured the model did not run (one sample of a BatchNorm).
      if (local_batch / microbatches < profile_.microbatch_sizes.front()) continue;
      for (const std::string& schedule : request_.schedules) {
        Pending p;
        PlanCandidate& c = p.candidate;
        c.schedule = schedule;
        c.dp = dp;
        c.pp = pp;
        c.stages_per_rank = per_rank;
        c.placement = placement;
        c.rank_order = order;
        c.microbatches = microbatches;
        c.microbatch_size = local_batch / microbatches;
        c.across_hosts = crossingsOf(request_, c);
        c.shared_cores = sharedCoresIn(profile_, request_, c);
        p.costs = costsOf(c);
        c.stage_starts = cuts_[{c.stages(), c.microbatch_size}];
        const Bounds bounds = boundsOf(profile_, c);
        p.step_bound = bounds.step;
        p.memory_bound = bounds.memory;
        out.push_back(std::move(p));
      }
    }
  }

  std::shared_ptr<const StageCosts> costsOf(const PlanCandidate& c) {
    const std::pair<int, int64_t> key{c.stages(), c.microbatch_size};
    auto found = costs_.find(key);
    if (found != costs_.end()) return found->second;
    const double size = static_cast<double>(c.microbatch_size);
    std::vector<size_t> starts;
    if (c.stages() > 1) starts = balancedCut(profile_, c.stages(), size);
    cuts_[key] = starts;
    auto costs = std::make_shared<const StageCosts>(stageCostsOf(profile_, starts, size));
    costs_[key] = costs;
    return costs;
  }

  const CostProfile& profile_;
  const PlanRequest& request_;
  int hosts_;
  std::map<std::pair<int, int64_t>, std::vector<size_t>> cuts_;
  std::map<std::pair<int, int64_t>, std::shared_ptr<const StageCosts>> costs_;
};

// The search over the enumerated candidates (Note [Planning a pipeline]).
constexpr int kSearchWidth = 10;
// The share of the memory budget a predicted peak leaves free: measured peaks were within
// 3% of the predicted ones either way (docs/benchmarks.md, the planner under a budget), and
// a run must stay under the budget, not on it.
constexpr double kPeakHeadroom = 0.03;
// Cuts of more stages are kept as balanced: refining costs a simulation per boundary move.

class Search {
 public:
  // Keeps at least kSearchWidth candidates whatever `request.keep` says, so that how many
  // a user prints does not change which are refined, and so which is chosen.
  Search(const CostProfile& profile, const PlanRequest& request, const ScheduleRegistry& registry,
         Plan& plan)
      : profile_(profile),
        request_(request),
        registry_(registry),
        plan_(plan),
        width_(std::max(request.keep, kSearchWidth)),
        budget_(request.memory_budget_bytes * (1 - kPeakHeadroom)) {}

  void run(std::vector<Pending>& pending) {
    std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
      return a.step_bound < b.step_bound;
    });
    for (Pending& p : pending) {
      if (full() && p.step_bound >= worstKeptStep()) break;
      if (overBudget(p.memory_bound)) {
        ++plan_.over_budget;
        unsimulated_.push_back(&p);
        continue;
      }
      const std::optional<PlanCandidate> c = simulate(p);
      if (!c) continue;
      if (overBudget(c->peak_bytes)) {
        ++plan_.over_budget;
        smallest_peak_ = std::min(smallest_peak_, c->peak_bytes);
        continue;
      }
      keep(*c);
    }
  }

  // Throws the error that says why nothing was kept.
  [[noreturn]] void failEmpty() {
    PPSTAGE_CHECK(plan_.simulated > plan_.refused || plan_.over_budget > 0, "every candidate ",
                  "was refused by its schedule (", plan_.refused,
                  " of them); the first: ", first_refusal_);
    // The smallest peak of all: simulate those the memory bound dropped, smallest bound first.
    std::sort(unsimulated_.begin(), unsimulated_.end(),
              [](const Pending* a, const Pending* b) { return a->memory_bound < b->memory_bound; });
    for (const Pending* p : unsimulated_) {
      if (p->memory_bound >= smallest_peak_) break;
      const std::optional<PlanCandidate> c = simulate(*p);
      if (c) smallest_peak_ = std::min(smallest_peak_, c->peak_bytes);
    }
    PPSTAGE_CHECK(smallest_peak_ < kInfinity, "every candidate under --plan.memory_mb was ",
                  "refused by its schedule; the first: ", first_refusal_);
    PPSTAGE_FAIL("no configuration of ", request_.ranks, " ranks fits --plan.memory_mb ",
                 request_.memory_budget_bytes / kBytesPerMiB,
                 ": the smallest predicted peak per rank is ", smallest_peak_ / kBytesPerMiB, " MB",
                 profile_.recomputePolicies().empty() ? "" : ", with every block recomputed",
                 " (a peak must leave ", 100 * kPeakHeadroom, "% of the budget free)");
  }

 private:
  bool full() const { return static_cast<int>(plan_.best.size()) >= width_; }
  // The slowest kept (the list is ordered by ranksBefore, which ties close steps).
  double worstKeptStep() const {
    double worst = 0;
    for (const PlanCandidate& c : plan_.best) worst = std::max(worst, c.step_s);
    return worst;
  }
  bool overBudget(double bytes) const { return budget_ > 0 && bytes > budget_; }

  std::optional<PlanCandidate> simulate(const Pending& p) {
    ++plan_.simulated;
    try {
      return simulateAndRefine(profile_, p.candidate, *p.costs, registry_, budget_);
    } catch (const Error& e) {
      ++plan_.refused;
      if (first_refusal_.empty()) first_refusal_ = p.candidate.label() + ": " + e.what();
      return std::nullopt;
    }
  }

  void keep(const PlanCandidate& c) {
    for (const PlanCandidate& kept : plan_.best) {
      if (sameRun(kept, c)) return;
    }
    auto at = std::upper_bound(plan_.best.begin(), plan_.best.end(), c, ranksBefore);
    plan_.best.insert(at, c);
    if (static_cast<int>(plan_.best.size()) > width_) plan_.best.pop_back();
  }

  const CostProfile& profile_;
  const PlanRequest& request_;
  const ScheduleRegistry& registry_;
  Plan& plan_;
  int width_;
  double budget_;  // what a predicted peak may reach: the request's, less the headroom
  std::string first_refusal_;
  double smallest_peak_ = kInfinity;
  std::vector<const Pending*> unsimulated_;
};

// No configuration (Plan::default_config where the default cannot run).
PlanCandidate absent() {
  PlanCandidate none;
  none.microbatches = 0;
  return none;
}

PlanCandidate defaultCandidate(const CostProfile& profile, const PlanRequest& request,
                               const ScheduleRegistry& registry) {
  PlanCandidate c;
  c.schedule = "1f1b";
  c.pp = request.ranks;
  c.microbatches = 2 * request.ranks;
  if (c.pp > static_cast<int>(possibleStarts(profile).size()) ||
      profile.batch_size % c.microbatches != 0 || registry.find(c.schedule) == nullptr) {
    return absent();
  }
  c.microbatch_size = profile.batch_size / c.microbatches;
  c.across_hosts = crossingsOf(request, c);
  c.shared_cores = sharedCoresIn(profile, request, c);
  if (c.pp > 1) c.stage_starts = defaultCut(profile, c.pp);
  try {
    return predictCandidate(profile, c, registry);
  } catch (const Error&) {
    return absent();
  }
}

}  // namespace

std::vector<size_t> paramsCut(const CostProfile& profile, int stages) {
  std::vector<double> bytes;
  for (const UnitCost& unit : profile.units) bytes.push_back(static_cast<double>(unit.param_bytes));
  return balancedStarts(profile, bytes, stages);
}

const char* defaultBalanceOf(const CostProfile& profile) {
  const auto counted = [](const UnitCost& unit) { return unit.flops > 0; };
  return std::any_of(profile.units.begin(), profile.units.end(), counted) ? "flops" : "params";
}

std::vector<size_t> defaultCut(const CostProfile& profile, int stages) {
  std::vector<double> flops;
  for (const UnitCost& unit : profile.units) flops.push_back(unit.flops);
  const bool counted = std::string(defaultBalanceOf(profile)) == "flops";
  return counted ? balancedStarts(profile, flops, stages) : paramsCut(profile, stages);
}

PlanCandidate cutFor(const CostProfile& profile, PlanCandidate c, const ScheduleRegistry& registry,
                     double budget_bytes) {
  const double size = static_cast<double>(c.microbatch_size);
  c.stage_starts = c.stages() > 1 ? balancedCut(profile, c.stages(), size) : std::vector<size_t>{};
  return simulateAndRefine(profile, c, stageCostsOf(profile, c.stage_starts, size), registry,
                           budget_bytes, Choosing::kCut);
}

PlanCandidate predictCandidate(const CostProfile& profile, PlanCandidate c,
                               const ScheduleRegistry& registry) {
  const Topology pipeline = Topology::forPipeline(c.stages(), c.stages_per_rank, c.placement);
  const double size = static_cast<double>(c.microbatch_size);
  if (c.stage_starts.empty() && c.stages() > 1)
    c.stage_starts = balancedCut(profile, c.stages(), size);
  const StageCosts costs = stageCostsOf(profile, c.stage_starts, size, &c.recompute);
  const PipelineSchedule schedule = buildSchedule(registry, scheduleOptionsOf(profile, c, costs));
  fillPrediction(profile, costs, pipeline, schedule, schedule.simulation, c);
  return c;
}

Plan planPipeline(const CostProfile& profile, const PlanRequest& request,
                  const ScheduleRegistry& registry) {
  PPSTAGE_CHECK(request.ranks >= 1, "--plan.ranks must be at least 1; got ", request.ranks);
  PPSTAGE_CHECK(request.host_of_rank.empty() ||
                    static_cast<int>(request.host_of_rank.size()) == request.ranks * request.tp,
                "hosts of ", request.host_of_rank.size(), " ranks for a plan of ",
                request.ranks * request.tp);
  PPSTAGE_CHECK(!request.schedules.empty(), "no schedule to plan with");
  Plan plan;
  std::vector<Pending> pending = Enumerator(profile, request).all();
  PPSTAGE_CHECK(!pending.empty(), "--plan.ranks ", request.ranks * request.tp,
                request.tp > 1 ? " in groups of --train.tp " + std::to_string(request.tp) : "",
                " cannot be laid out: ", "data parallelism must divide the batch (",
                profile.batch_size, ") and the pipeline ranks be at most the model's ",
                possibleStarts(profile).size(), " units");
  plan.candidates = static_cast<int64_t>(pending.size());
  Search search(profile, request, registry, plan);
  search.run(pending);
  if (plan.best.empty()) search.failEmpty();
  std::stable_sort(plan.best.begin(), plan.best.end(), ranksBefore);
  if (static_cast<int>(plan.best.size()) > request.keep) plan.best.resize(request.keep);
  plan.default_config = defaultCandidate(profile, request, registry);
  for (PlanCandidate& c : plan.best) c.tp = request.tp;
  plan.default_config.tp = request.tp;
  return plan;
}

}  // namespace ppstage
