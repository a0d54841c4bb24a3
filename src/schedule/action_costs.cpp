// See include/ppstage/schedule/simulator.h: what each action costs the simulator, and how
// fast a rank computes on cores it shares.
#include "ppstage/schedule/simulator.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ppstage/core/text.h"

namespace ppstage {

double ActionCosts::of(ActionKind kind) const {
  switch (kind) {
    case ActionKind::kForward: return forward;
    case ActionKind::kBackward: return backward;
    case ActionKind::kBackwardInput: return input_grad;
    case ActionKind::kBackwardWeight: return weight_grad;
    default: return 0;
  }
}

// per_stage's entries are F, B, I, W in ActionKind's order.
static_assert(static_cast<int>(ActionKind::kForward) == 0 &&
              static_cast<int>(ActionKind::kBackward) == 1 &&
              static_cast<int>(ActionKind::kBackwardInput) == 2 &&
              static_cast<int>(ActionKind::kBackwardWeight) == 3);

double ActionCosts::of(ActionKind kind, int stage) const {
  const double tp = kind == ActionKind::kForward ? tp_forward
                    : kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput
                        ? tp_backward
                        : 0;
  if (per_stage.empty() || kind > ActionKind::kBackwardWeight) return of(kind) + tp;
  return per_stage.at(static_cast<size_t>(stage))[kind] + tp;
}

double ActionCosts::of(ActionKind kind, int stage, int microbatch) const {
  const double cost = of(kind, stage);
  if (microbatch_scale.empty()) return cost;
  return cost * microbatch_scale.at(static_cast<size_t>(microbatch));
}

// Note [Ranks that share cores]
// On CPUs a rank computes with its intra-op threads, and a machine that runs more of them
// than it has cores gives each thread a share of one. The planner's costs are measured
// by the job's ranks in turns of a core per thread where they outnumber the cores
// (CpuLayout::measuringTurns; measure/unit_costs.h), each holding the share a thread had
// then (1 in turns; 4 ranks on 2 cores all measuring at once measured 1.8-2.1x a rank
// alone, docs/benchmarks.md). In a run the ranks do not all compute at once. A rank that
// waits for a message yields its core (comm's wait spins with sched_yield, then sleeps),
// and the ranks that compute meanwhile run faster than they were measured: in a pipeline's
// warm-up and drain, or while a message crosses a slow link. gpt-small at pp 2 x dp 2, 4
// ranks on 2 cores, stepped in 0.78-0.91 of the prediction that took each rank to compute
// on cores of its own. So, given SharedCores, the simulator runs in time order and takes
// each compute action's cost as work: it progresses at min(1, cores / threads computing
// on the machine) / the share measured, recomputed whenever an action starts or ends. With
// cores enough for every thread, as on a GPU machine or where --train.threads fits, no
// SharedCores is given and the costs are the durations. Scaling every cost by the share
// of the step a rank computes instead (8fefb9f, reverted) credited ranks that all wait at
// once (a data-parallel all-reduce over a slow link) with cores nobody gave up. Runs on
// 2 cores took 1.0-1.2x this prediction, the most across hosts (docs/benchmarks.md).
double SharedCores::speedOf(size_t rank, const std::vector<bool>& computing) const {
  double speed = 0;
  bool placed = false;
  for (size_t m = 0; m < cores.size(); ++m) {
    if (threads[m].at(rank) <= 0) continue;
    double load = 0;
    for (size_t r = 0; r < computing.size(); ++r) {
      if (computing[r]) load += threads[m][r];
    }
    const double here = std::min(1.0, cores[m] / load) / measured_share;
    speed = placed ? std::min(speed, here) : here;
    placed = true;
  }
  return placed ? speed : 1.0;
}

double ActionCosts::commOf(int boundary, int microbatch) const {
  const double seconds =
      boundary_comm.empty() ? comm : boundary_comm.at(static_cast<size_t>(boundary));
  if (message_scale.empty()) return seconds;
  return seconds * message_scale.at(static_cast<size_t>(microbatch));
}

namespace {

// Non-negative numbers, comma-separated, one per name of `names` ("F,B,I,W"), for `option`
// ("--costs takes four numbers F,B,I,W (such as 1,2,1,1)").
std::vector<double> parseCosts(const std::string& text, const char* option, const char* count,
                               const char* names, const char* example) {
  const std::vector<std::string> items = splitList(text);
  const size_t wanted = splitList(names).size();
  PPSTAGE_CHECK(items.size() == wanted, option, " takes ", count, " numbers ", names, " (such as ",
                example, "); got '", text, "'");
  std::vector<double> values(wanted);
  for (size_t i = 0; i < wanted; ++i) {
    size_t used = 0;
    try {
      values[i] = std::stod(items[i], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    PPSTAGE_CHECK(used == items[i].size() && values[i] >= 0 && std::isfinite(values[i]), option,
                  ": '", items[i], "' is not a non-negative number");
  }
  return values;
}

}  // namespace

void ActionCosts::parseTensorParallel(const std::string& text) {
  const std::vector<double> values = parseCosts(text, "--tp_costs", "two", "F,B", "0.1,0.1");
  tp_forward = values[0];
  tp_backward = values[1];
}

ActionCosts ActionCosts::parse(const std::string& text) {
  const std::vector<double> values = parseCosts(text, "--costs", "four", "F,B,I,W", "1,2,1,1");
  ActionCosts costs;
  costs.forward = values[0];
  costs.backward = values[1];
  costs.input_grad = values[2];
  costs.weight_grad = values[3];
  return costs;
}

}  // namespace ppstage
