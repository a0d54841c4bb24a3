// See src/plan/stage_costs.h.
#include "stage_costs.h"

#include <algorithm>
#include <map>
#include <set>

#include "ppstage/core/all_reduce_buckets.h"
#include "ppstage/core/step_reduce_size.h"
#include "ppstage/schedule/early_receives.h"

namespace ppstage {

std::vector<size_t> possibleStarts(const CostProfile& profile) {
  std::vector<size_t> starts;
  std::set<std::string> seen;
  for (size_t u = 0; u < profile.units.size(); ++u) {
    if (seen.insert(profile.units[u].path).second) starts.push_back(u);
  }
  return starts;
}

namespace {

// Whether unit `u`, the `holder`-th unit holding blocks of stage `s` (from 0), recomputes.
bool recomputes(const CostProfile& profile, size_t u, int holder, size_t s,
                const PlannedRecompute* recompute) {
  if (recompute == nullptr || !recompute->any() || profile.units[u].blocks.empty()) return false;
  return s < recompute->units.size() && holder < recompute->units[s];
}

// Note [A stage's backward peak]
// A stage's B takes the gradients of all its weights from one autograd pass and adds them
// to the accumulated ones after it (runtime/executor.cpp): while unit u's backward runs,
// the units before it still hold their activations, the units after it have freed theirs
// but their weights' new gradients wait, and u's own backward peaks (its measured
// backward_peak_bytes, above its start). Over the micro-batch's own kept bytes, that is
// bp(u) + the weight gradients of the units after u - the activations of the units after
// u, and the stage's peak is the largest over u. Without recomputation the activations a
// unit frees about pay for the gradients it leaves, and the last unit's own peak
// decides; with them recomputed the first unit's decides, with nearly all the stage's
// new gradients beside it.
double backwardPeakOf(const std::vector<double>& own_peak, const std::vector<double>& activations,
                      const std::vector<double>& gradients) {
  double peak = 0, after_gradients = 0, after_activations = 0;
  for (size_t k = own_peak.size(); k-- > 0;) {
    peak = std::max(peak, own_peak[k] + after_gradients - after_activations);
    after_gradients += gradients[k];
    after_activations += activations[k];
  }
  return peak;
}

}  // namespace

StageCosts stageCostsOf(const CostProfile& profile, const std::vector<size_t>& starts, double size,
                        const PlannedRecompute* recompute) {
  StageCosts out;
  // A weight's gradient is in its own dtype (bf16 ones are added to fp32 masters later).
  const double gradient_bytes = profile.precision == "bf16" ? 2.0 : 4.0;
  size_t begin = 0;
  for (size_t s = 0; s <= starts.size(); ++s) {
    const size_t end = s < starts.size() ? starts[s] : profile.units.size();
    PerCompute<double> compute;
    double activations = 0, weight_pending = 0, parameters = 0, trainable = 0;
    std::vector<double> unit_peaks, unit_activations, unit_gradients;
    int holder = 0;
    for (size_t u = begin; u < end; ++u) {
      const UnitCost& unit = profile.units[u];
      const RecomputePolicy policy =
          recomputes(profile, u, holder, s, recompute) ? recompute->policy : RecomputePolicy::kNone;
      if (!unit.blocks.empty()) ++holder;
      for (const ActionKind kind : PerCompute<double>::kinds()) {
        compute[kind] += profile.secondsOf(u, kind, size, policy);
      }
      activations += profile.activationBytesOf(u, size, policy);
      weight_pending += profile.weightPendingBytesOf(u, size, policy);
      unit_peaks.push_back(profile.backwardPeakBytesOf(u, size, policy));
      unit_activations.push_back(profile.activationBytesOf(u, size, policy));
      unit_gradients.push_back(gradient_bytes * static_cast<double>(unit.trainable_elements));
      trainable += static_cast<double>(unit.trainable_elements);
      parameters += static_cast<double>(unit.param_bytes);
    }
    out.input_bytes.push_back(begin > 0 ? profile.outputBytesOf(begin - 1, size) : 0.0);
    const bool last = end >= profile.units.size();
    out.output_bytes.push_back(!last && end > begin ? profile.outputBytesOf(end - 1, size) : 0.0);
    out.compute.push_back(compute);
    out.activation_bytes.push_back(activations);
    out.weight_pending_bytes.push_back(weight_pending);
    out.backward_peak_bytes.push_back(backwardPeakOf(unit_peaks, unit_activations, unit_gradients));
    // An I makes no weight gradients: only the units' own peaks and what they free.
    out.input_backward_peak_bytes.push_back(backwardPeakOf(
        unit_peaks, unit_activations, std::vector<double>(unit_gradients.size(), 0.0)));
    out.parameter_bytes.push_back(parameters);
    out.trainable_elements.push_back(trainable);
    out.new_gradient_bytes.push_back(gradient_bytes * trainable);
    out.accumulated_gradient_bytes.push_back(profile.precision == "bf16" ? 0.0 : 4.0 * trainable);
    begin = end;
  }
  return out;
}

bool splitsBackward(const PipelineSchedule& schedule) {
  for (const ActionList& actions : schedule.ranks) {
    for (const Action& a : actions) {
      if (a.kind == ActionKind::kBackwardWeight) return true;
    }
  }
  return false;
}

double aliveBytes(const StageCosts& costs, int s, bool splits_backward) {
  return splits_backward ? std::max(costs.activation_bytes[s], costs.weight_pending_bytes[s])
                         : costs.activation_bytes[s];
}

namespace {

// Note [Receive buffers in the peak]
// A rank receives into buffers it allocates once and keeps across steps
// (runtime/receive_buffers.h): per (stage, RECV_F or RECV_B), the most its action list
// holds at once with its receives posted ahead (schedule/early_receives.h, as a run over
// MPI posts them; NCCL's order can post fewer ahead). A stage's received
// input is what its forward reads and its backward keeps, and no unit's measured bytes
// hold it (a unit's bytes are what its own forward made). On gpt-small at pp 2 x 4 stages
// with every block recomputed they were 3.9 MB of a rank's 44 MB.
double receiveBufferBytes(const StageCosts& costs, const ActionList& actions) {
  double bytes = 0;
  for (const auto& [pool, held] : receiveBuffersHeld(postReceivesEarly(actions, {}))) {
    const auto stage = static_cast<size_t>(pool.first);
    const double each = pool.second == ActionKind::kRecvForward ? costs.input_bytes.at(stage)
                                                                : costs.output_bytes.at(stage);
    bytes += held * each;
  }
  return bytes;
}

// Note [A rank's memory through its actions]
// A rank's peak is found by walking its action list, as its executor runs it: an F adds
// what a micro-batch keeps on its stage, an I turns that into what waits for its W, a B or
// W lets it go; a B or I holds its stage's backward peak on top while it runs (Note [A
// stage's backward peak], an I without the weights' gradients it does not make), a W the
// weights' new gradients. In fp32 a stage's accumulated
// gradients appear at its first B or W (the first micro-batch's become them); bf16's fp32
// accumulators exist from the step's start. Counting every stage's gradients and the most
// micro-batches in flight all at once over-predicted interleaved schedules by 6% (gpt-small,
// pp 2 x 4 stages, a stage's first backward comes late, and its gradients with it).
double walkPeak(const StageCosts& costs, const ActionList& actions, double base) {
  std::map<std::pair<int, int>, double> held;  // (stage, micro-batch) -> bytes it keeps
  std::set<int> with_gradients;
  double alive = 0, gradients = 0, peak = base;
  const auto firstBackward = [&](int s) {
    if (with_gradients.insert(s).second) gradients += costs.accumulated_gradient_bytes[s];
  };
  for (const Action& a : actions) {
    const int s = a.stage;
    const std::pair<int, int> key{s, a.microbatch};
    const double now = base + gradients + alive;
    switch (a.kind) {
      case ActionKind::kForward:
        held[key] = costs.activation_bytes[s];
        alive += costs.activation_bytes[s];
        peak = std::max(peak, now + costs.activation_bytes[s]);
        break;
      case ActionKind::kBackward:
        peak = std::max(peak, now + costs.backward_peak_bytes[s]);
        alive -= held[key];
        held.erase(key);
        firstBackward(s);
        break;
      case ActionKind::kBackwardInput:
        peak = std::max(peak, now + costs.input_backward_peak_bytes[s]);
        alive += costs.weight_pending_bytes[s] - held[key];
        held[key] = costs.weight_pending_bytes[s];
        break;
      case ActionKind::kBackwardWeight:
        peak = std::max(peak, now + costs.new_gradient_bytes[s]);
        alive -= held[key];
        held.erase(key);
        firstBackward(s);
        break;
      default: break;  // messages: their buffers are the receive pools, counted in `base`
    }
  }
  return peak;
}

}  // namespace

std::vector<double> rankPeakBytes(const CostProfile& profile, const StageCosts& costs,
                                  const Topology& pipeline, const PipelineSchedule& schedule,
                                  const PlanCandidate& c) {
  const int dp = c.dp;
  const double state = profile.stateBytesPerElement(dp, c.shard_optimizer);
  std::vector<double> peaks;
  for (int r = 0; r < pipeline.ppSize(); ++r) {
    const ActionList& actions = schedule.ranks.at(static_cast<size_t>(r));
    double resident = receiveBufferBytes(costs, actions), gradient_bytes = 0, dynamic = 0;
    for (int s : pipeline.stagesOf(r)) {
      resident += costs.parameter_bytes[s] + state * costs.trainable_elements[s];
      dynamic += costs.accumulated_gradient_bytes[s];
      gradient_bytes += 4.0 * costs.trainable_elements[s];  // fp32
    }
    double peak = walkPeak(costs, actions, resident - dynamic);
    if (dp > 1) {
      const double bucket = std::min(gradient_bytes, static_cast<double>(kAllReduceBucketBytes));
      peak = std::max(peak, resident + bucket * (1.0 + 1.0 / dp));
    }
    peaks.push_back(peak);
  }
  return peaks;
}

ActionCosts actionCostsOf(const CostProfile& profile, const StageCosts& costs,
                          const PlanCandidate& c) {
  const HostCrossings& across = c.across_hosts;
  ActionCosts out;
  out.per_stage = costs.compute;
  out.shared_cores = c.shared_cores;
  for (size_t s = 0; s + 1 < costs.output_bytes.size(); ++s) {
    const bool crosses = std::find(across.boundaries.begin(), across.boundaries.end(),
                                   static_cast<int>(s)) != across.boundaries.end();
    out.boundary_comm.push_back(profile.messageSeconds(costs.output_bytes[s], crosses));
    out.comm = std::max(out.comm, out.boundary_comm.back());
  }
  return out;
}

namespace {

// What one pipeline rank does after its actions in a step: sums its gradients with its
// replicas and a tied weight's other holders, and, once the step's all-reduce has joined
// every rank (joinSecondsOf), steps its optimizer. Of the sums' seconds over the links they cross,
// `on_cores` is what they take inside a host: there they copy and add on the rank's cores (Note [A
// step's tail on shared cores] in src/schedule/simulator.cpp). A sharded optimizer's
// all-gather, `gathered` of those, follows its step.
struct RankTail {
  double all_reduce = 0;
  double on_cores = 0;
  double gathered = 0;
  double optimizer = 0;
};

// The pipeline ranks holding a copy of `tie` under `c`'s cut.
std::vector<int> ownersOf(const CostProfile::Tie& tie, const Topology& pipeline,
                          const PlanCandidate& c) {
  std::vector<int> owners;
  for (const size_t u : tie.units) {
    const auto stage =
        std::upper_bound(c.stage_starts.begin(), c.stage_starts.end(), u) - c.stage_starts.begin();
    const int owner = pipeline.ppRankOfStage(static_cast<int>(stage));
    if (std::find(owners.begin(), owners.end(), owner) == owners.end()) owners.push_back(owner);
  }
  return owners;
}

// Which links a sum is charged: those its ranks cross, or a host's whatever they cross
// (what it takes the cores, RankTail::on_cores).
enum class SumLinks { kCrossed, kInsideHost };

// Note [Tied weights in the plan]
// A tensor several units hold (CostProfile::ties: gpt's token embedding and its LM head)
// has a copy on each stage holding one of them, and the step sums the copies' gradients:
// on one pipeline rank in place, across ranks by an all-reduce among the ranks holding a
// copy, after the data-parallel one (train/gradient_sync.cpp), between hosts where two of
// them are. On gpt-small with the first and last stages on hosts 5 ms apart, that sum of
// 256 KiB took tens of milliseconds a step, which the plan left out (docs/benchmarks.md).
// tiedSecondsOf: what those sums take pipeline rank `rank` in a step.
double tiedSecondsOf(const CostProfile& profile, const Topology& pipeline, const PlanCandidate& c,
                     int rank, SumLinks links) {
  double seconds = 0;
  for (const CostProfile::Tie& tie : profile.ties) {
    const std::vector<int> owners = ownersOf(tie, pipeline, c);
    if (owners.size() < 2 || std::find(owners.begin(), owners.end(), rank) == owners.end()) {
      continue;
    }
    bool across = false;
    for (const int p : owners) {
      for (const int q : owners) across = across || c.across_hosts.apart(p, q);
    }
    seconds += profile.allReduceSeconds(static_cast<double>(tie.gradient_bytes),
                                        static_cast<int>(owners.size()),
                                        across && links == SumLinks::kCrossed);
  }
  return seconds;
}

RankTail rankTailOf(const CostProfile& profile, const StageCosts& costs, const Topology& pipeline,
                    const PlanCandidate& c, int rank) {
  double elements = 0;
  for (int s : pipeline.stagesOf(rank)) elements += costs.trainable_elements[s];
  const double bytes = 4.0 * elements;  // fp32
  RankTail tail;
  tail.all_reduce = profile.allReduceSeconds(bytes, c.dp, c.across_hosts.data_parallel) +
                    tiedSecondsOf(profile, pipeline, c, rank, SumLinks::kCrossed);
  const double replicas = profile.allReduceSeconds(bytes, c.dp, false);
  tail.on_cores = replicas + tiedSecondsOf(profile, pipeline, c, rank, SumLinks::kInsideHost);
  tail.gathered = c.shard_optimizer ? replicas / 2 : 0;
  tail.optimizer = profile.optimizerSeconds(elements, c.dp, c.shard_optimizer);
  return tail;
}

// The step's all-reduce of losses, norms and figures (stepReduceBytes) over every rank, which joins
// them all before any optimizer steps: as the job's probe measured it over as many ranks, else by
// the all-reduce line, between hosts where the job's groups cross them (one of them does where the
// job spans hosts).
double joinSecondsOf(const CostProfile& profile, const Topology& pipeline, const PlanCandidate& c) {
  const HostCrossings& across = c.across_hosts;
  const bool spans = !across.boundaries.empty() || across.data_parallel || across.tensor_parallel ||
                     !across.pipeline_ranks_apart.empty();
  const int world = pipeline.ppSize() * c.dp * c.tp;
  if (profile.step_reduce_ranks == world) return profile.step_reduce_s;
  if (profile.allreduce_bytes_per_s <= 0) return 0;  // a profile without its links
  return profile.allReduceSeconds(static_cast<double>(stepReduceBytes(world)), world, spans);
}

// The tail after a step's actions: a rank's optimizer and, with dp > 1, the all-reduce of
// its gradients (fp32) over its replicas; the largest rank's, as every rank waits for it
// in the step's all-reduce (over the link between hosts where its group crosses them). A
// sharded optimizer steps 1/dp of the elements, and its reduce-scatter and all-gather move
// what the all-reduce's two halves move. A rank holding a tied weight's copy also sums it
// with the others' (Note [Tied weights in the plan]). No optimizer steps before the step's
// all-reduce has joined every rank after its sums (joinSecondsOf): the largest sums, the
// join, then the largest optimizer.
double tailOf(const CostProfile& profile, const StageCosts& costs, const Topology& pipeline,
              const PlanCandidate& c) {
  double sums = 0, optimizer = 0;
  for (int r = 0; r < pipeline.ppSize(); ++r) {
    const RankTail rank = rankTailOf(profile, costs, pipeline, c, r);
    sums = std::max(sums, rank.all_reduce);
    optimizer = std::max(optimizer, rank.optimizer);
  }
  return sums + joinSecondsOf(profile, pipeline, c) + optimizer;
}

// Where the ranks share cores (Note [Ranks that share cores]): the step simulated with each
// rank's tail inside it (Note [A step's tail on shared cores]), its sums computing beside
// the others' last actions (the last stage's beside the first stage's last backward,
// unless a tied weight's sum makes the last wait for the first) rather than after all.
double stepOnSharedCores(const CostProfile& profile, const StageCosts& costs,
                         const Topology& pipeline, const PipelineSchedule& schedule,
                         const PlanCandidate& c) {
  ActionCosts with_tails = actionCostsOf(profile, costs, c);
  for (int r = 0; r < pipeline.ppSize(); ++r) {
    const RankTail rank = rankTailOf(profile, costs, pipeline, c, r);
    with_tails.shared_cores.tail_wait.push_back(std::max(0.0, rank.all_reduce - rank.on_cores));
    with_tails.shared_cores.tail_sum.push_back(rank.on_cores - rank.gathered);
    with_tails.shared_cores.tail_compute.push_back(rank.optimizer + rank.gathered);
  }
  with_tails.shared_cores.tail_join = joinSecondsOf(profile, pipeline, c);
  // A tied weight's sum waits for every rank holding a copy.
  std::vector<std::vector<size_t>>& after = with_tails.shared_cores.tail_after;
  after.assign(static_cast<size_t>(pipeline.ppSize()), {});
  for (const CostProfile::Tie& tie : profile.ties) {
    const std::vector<int> owners = ownersOf(tie, pipeline, c);
    for (const int r : owners) {
      for (const int q : owners) {
        std::vector<size_t>& mine = after[static_cast<size_t>(r)];
        if (q != r && std::find(mine.begin(), mine.end(), static_cast<size_t>(q)) == mine.end()) {
          mine.push_back(static_cast<size_t>(q));
        }
      }
    }
  }
  return simulateSchedule(schedule.request, schedule.ranks, with_tails).makespan;
}

}  // namespace

void fillPrediction(const CostProfile& profile, const StageCosts& costs, const Topology& pipeline,
                    const PipelineSchedule& schedule, const SimulationResult& simulation,
                    PlanCandidate& c) {
  c.makespan_s = simulation.makespan;
  c.tail_s = tailOf(profile, costs, pipeline, c);
  if (!c.shared_cores.empty()) {  // what the tails add, overlapping the others' actions
    c.tail_s = stepOnSharedCores(profile, costs, pipeline, schedule, c) - c.makespan_s;
  }
  c.step_s = c.makespan_s + c.tail_s;
  c.bubble = simulation.bubble_fraction;
  c.inflight = simulation.peak_inflight;
  const std::vector<double> peaks = rankPeakBytes(profile, costs, pipeline, schedule, c);
  c.peak_bytes = *std::max_element(peaks.begin(), peaks.end());
  c.tokens_per_s =
      c.step_s > 0 ? static_cast<double>(profile.batch_size * profile.tokens_per_sample) / c.step_s
                   : 0;
}

}  // namespace ppstage
