// See include/ppstage/schedule/simulator.h. Structure checks first (checkStructure), then
// the timed run (Simulation), then the derived figures.
#include "ppstage/schedule/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "ppstage/core/text.h"

namespace ppstage {

namespace {

using Mark = std::pair<size_t, size_t>;  // (rank, position)

std::string grid(const std::vector<ActionList>& ranks, const std::vector<Mark>& marks) {
  std::ostringstream out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    out << "rank " << r << ":";
    for (size_t p = 0; p < ranks[r].size(); ++p) {
      const bool marked = std::find(marks.begin(), marks.end(), Mark{r, p}) != marks.end();
      out << ' ' << (marked ? "[" : "") << toString(ranks[r][p]) << (marked ? "]" : "");
    }
    if (std::find_if(marks.begin(), marks.end(), [&](const Mark& m) {
          return m.first == r && m.second >= ranks[r].size();
        }) != marks.end()) {
      out << " [end]";
    }
    out << '\n';
  }
  return out.str();
}

[[noreturn]] void fail(const std::vector<ActionList>& ranks, const std::vector<Mark>& marks,
                       const std::string& summary) {
  throw ScheduleError(summary, grid(ranks, marks));
}

// Position of every action: (rank, index), keyed by the action.
using Positions = std::map<Action, Mark>;

Positions checkStructure(const ScheduleRequest& req, const std::vector<ActionList>& ranks) {
  if (static_cast<int>(ranks.size()) != req.numRanks()) {
    fail(ranks, {},
         detail::concat("the schedule has ", ranks.size(), " ranks; ", req.num_stages,
                        " stages at ", req.stages_per_rank, " per rank need ", req.numRanks()));
  }
  Positions where;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (size_t p = 0; p < ranks[r].size(); ++p) {
      const Action& a = ranks[r][p];
      const std::string name = toString(a);
      if (a.stage < 0 || a.stage >= req.num_stages || a.microbatch < 0 ||
          a.microbatch >= req.num_microbatches) {
        fail(ranks, {{r, p}},
             detail::concat(name, " names a stage or micro-batch outside the ", req.num_stages,
                            " stages and ", req.num_microbatches, " micro-batches (from 0)"));
      }
      if (req.rank_of_stage[a.stage] != static_cast<int>(r)) {
        fail(ranks, {{r, p}},
             detail::concat("rank ", r, " runs ", name, " but stage ", a.stage, " is on rank ",
                            req.rank_of_stage[a.stage]));
      }
      if (!where.emplace(a, Mark{r, p}).second) {
        fail(ranks, {where[a], {r, p}}, detail::concat(name, " appears twice"));
      }
    }
  }
  return where;
}

bool has(const Positions& where, const Action& a) { return where.count(a) > 0; }

void checkComputeCoverage(const ScheduleRequest& req, const std::vector<ActionList>& ranks,
                          const Positions& where) {
  for (int s = 0; s < req.num_stages; ++s) {
    for (int m = 0; m < req.num_microbatches; ++m) {
      const bool f = has(where, forwardOf(s, m)), b = has(where, backwardOf(s, m));
      const bool i = has(where, inputGradOf(s, m)), w = has(where, weightGradOf(s, m));
      const std::string at = detail::concat("stage ", s, ", micro-batch ", m);
      if (!f) fail(ranks, {}, detail::concat(at, " has no forward (", s, "F", m, ")"));
      if (b && (i || w)) {
        fail(ranks, {where.at(backwardOf(s, m))},
             detail::concat(at, " has both a full backward and an I/W split"));
      }
      if (!b && !(i && w)) {
        fail(ranks, {},
             detail::concat(at, " has no backward: needs ", s, "B", m, " or both ", s, "I", m,
                            " and ", s, "W", m));
      }
    }
  }
}

// Every SEND has its RECV on the neighbour's rank and the reverse; a compute that needs a
// remote input has its RECV earlier on its rank; a SEND comes after what it sends.
void checkCommunication(const ScheduleRequest& req, const std::vector<ActionList>& ranks,
                        const Positions& where) {
  auto gradOf = [&](int s, int m) {
    return has(where, backwardOf(s, m)) ? backwardOf(s, m) : inputGradOf(s, m);
  };
  for (const auto& entry : where) {
    const Action& a = entry.first;
    const Mark pos = entry.second;  // a copy: lambdas cannot capture structured bindings
    const int s = a.stage, m = a.microbatch;
    const std::string name = toString(a);
    // `other` must exist and, when `before_me`, come earlier on this rank.
    auto need = [&](const Action& other, bool before_me, const std::string& why) {
      const auto it = where.find(other);
      if (it == where.end()) fail(ranks, {pos}, name + " " + why + ": no " + toString(other));
      if (before_me && it->second.first == pos.first && it->second.second > pos.second) {
        fail(ranks, {pos, it->second},
             name + " " + why + ", so it must come after " + toString(other));
      }
    };
    switch (a.kind) {
      case ActionKind::kSendForward:
        if (s + 1 >= req.num_stages || req.rank_of_stage[s + 1] == req.rank_of_stage[s]) {
          fail(ranks, {pos}, name + " sends to a stage on the same rank or past the last");
        }
        need({ActionKind::kRecvForward, s + 1, m}, false, "is never received");
        need(forwardOf(s, m), true, "sends the output of");
        break;
      case ActionKind::kSendBackward:
        if (s == 0 || req.rank_of_stage[s - 1] == req.rank_of_stage[s]) {
          fail(ranks, {pos}, name + " sends to a stage on the same rank or before the first");
        }
        need({ActionKind::kRecvBackward, s - 1, m}, false, "is never received");
        need(gradOf(s, m), true, "sends the gradient of");
        break;
      case ActionKind::kRecvForward:
        need({ActionKind::kSendForward, s - 1, m}, false, "is never sent");
        break;
      case ActionKind::kRecvBackward:
        need({ActionKind::kSendBackward, s + 1, m}, false, "is never sent");
        break;
      case ActionKind::kForward:
        if (s > 0 && req.rank_of_stage[s - 1] != req.rank_of_stage[s]) {
          need({ActionKind::kRecvForward, s, m}, true, "needs its input first");
        }
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        if (s + 1 < req.num_stages && req.rank_of_stage[s + 1] != req.rank_of_stage[s]) {
          need({ActionKind::kRecvBackward, s, m}, true, "needs its output's gradient first");
        }
        break;
      default: break;
    }
  }
}

// The timed run: an action starts when its rank is free and its inputs exist.
class Simulation {
 public:
  Simulation(const ScheduleRequest& req, const std::vector<ActionList>& ranks,
             const ActionCosts& costs)
      : req_(req), ranks_(ranks), costs_(costs) {}

  SimulationResult run() {
    return costs_.shared_cores.empty() ? runOnOwnCores() : runOnSharedCores();
  }

 private:
  // Each rank's actions take their costs.
  SimulationResult runOnOwnCores() {
    const size_t P = ranks_.size();
    std::vector<size_t> pos(P, 0);
    std::vector<double> clock(P, 0);
    SimulationResult result;
    result.busy.assign(P, 0);
    result.start.resize(P);
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t r = 0; r < P; ++r) {
        while (pos[r] < ranks_[r].size()) {
          const Action& a = ranks_[r][pos[r]];
          const std::optional<double> ready = readyTime(a);
          if (!ready) break;
          const double start = std::max(clock[r], *ready);
          const double cost = costs_.of(a.kind, a.stage, a.microbatch);
          clock[r] = start + cost;
          result.busy[r] += cost;
          result.start[r].push_back(start);
          finished_[a] = clock[r];
          ++pos[r];
          progress = true;
        }
      }
    }
    failOnStuck(pos);
    result.makespan = *std::max_element(clock.begin(), clock.end());
    return result;
  }

  // Note [Ranks that share cores] (action_costs.cpp): the same rules in time order. A compute
  // action's cost is work done at the speed its rank has (SharedCores::speedOf), which changes
  // whenever some rank starts or ends one; a rank that waits computes nothing.
  SimulationResult runOnSharedCores() {
    SharedRun run(ranks_.size());
    for (;;) {
      startReadyItems(run);
      const double next = nextChange(run);
      if (std::isinf(next)) break;  // every rank is done or waits forever
      advanceTo(run, next);
    }
    failOnStuck(run.pos);
    run.result.makespan = run.now;
    return std::move(run.result);
  }

  // What runOnSharedCores tracks: per rank, its position among its items (its actions,
  // then any tail's two: its sums and its optimizer), whether it computes one, the work it
  // has left, when it began, its speed and end at the last change, and when its actions
  // and its sums ended.
  struct SharedRun {
    explicit SharedRun(size_t ranks)
        : pos(ranks, 0),
          computing(ranks, false),
          left(ranks, 0),
          began(ranks, 0),
          speed(ranks, 0),
          ends(ranks, 0),
          actions_end(ranks, 0),
          sums_end(ranks, 0) {
      result.busy.assign(ranks, 0);
      result.start.resize(ranks);
    }
    std::vector<size_t> pos;
    std::vector<bool> computing;
    std::vector<double> left, began, speed, ends, actions_end, sums_end;
    double now = 0;
    SimulationResult result;
  };

  bool hasTail() const { return !costs_.shared_cores.tail_compute.empty(); }
  size_t itemsOf(size_t r) const { return ranks_[r].size() + (hasTail() ? 2 : 0); }

  // Note [A step's tail on shared cores]
  // After its actions a rank sums its gradients with the ranks that hold copies of them:
  // its replicas' (train/gradient_sync.cpp), which run its actions at its times, and the
  // other stages' holding a tied weight (SharedCores::tail_after), whose actions end when
  // theirs do. On CPUs those sums copy and add on the rank's cores, so they share them
  // like an action. Then the step's all-reduce of losses and gradient norms
  // (train/step_runner.cpp) waits for every rank, so no optimizer steps before the last
  // rank has summed and that all-reduce has ended (SharedCores::tail_join). gpt-small at pp 2 x dp
  // 2 on 2 cores, traced: the cores were busy the whole step, and the four optimizers stepped
  // together after the sums, which took twice their probed time beside the first stage's last
  // backward (docs/benchmarks.md).
  std::optional<double> readyOf(const SharedRun& run, size_t r) const {
    const size_t actions = ranks_[r].size();
    if (run.pos[r] < actions) return readyTime(ranks_[r][run.pos[r]]);
    const SharedCores& cores = costs_.shared_cores;
    if (run.pos[r] > actions) {  // the optimizer, once every rank has summed
      double from = 0;
      for (size_t q = 0; q < ranks_.size(); ++q) {
        if (run.pos[q] <= ranks_[q].size()) return std::nullopt;  // q has not summed
        from = std::max(from, run.sums_end[q]);
      }
      return from + cores.tail_join;
    }
    double from = run.actions_end[r];
    for (const size_t q : cores.tail_after.empty() ? std::vector<size_t>{} : cores.tail_after[r]) {
      if (run.pos[q] < ranks_[q].size()) return std::nullopt;  // q still runs its actions
      from = std::max(from, run.actions_end[q]);
    }
    return from + (cores.tail_wait.empty() ? 0 : cores.tail_wait.at(r));
  }

  double costOf(const SharedRun& run, size_t r) const {
    const SharedCores& cores = costs_.shared_cores;
    const size_t actions = ranks_[r].size();
    if (run.pos[r] == actions) return cores.tail_sum.empty() ? 0 : cores.tail_sum.at(r);
    if (run.pos[r] > actions) return cores.tail_compute.at(r);
    const Action& a = ranks_[r][run.pos[r]];
    return costs_.of(a.kind, a.stage, a.microbatch);
  }

  // Rank r's item ends at `t`.
  void endItem(SharedRun& run, size_t r, double t) {
    const size_t actions = ranks_[r].size();
    if (run.pos[r] < actions) finished_[ranks_[r][run.pos[r]]] = t;
    if (run.pos[r] == actions) run.sums_end[r] = t;
    if (++run.pos[r] == actions) run.actions_end[r] = t;
  }

  // Every item that can start now does; one that takes no time (a message's posting) ends
  // at once, and may let others start.
  void startReadyItems(SharedRun& run) {
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t r = 0; r < ranks_.size(); ++r) {
        while (!run.computing[r] && run.pos[r] < itemsOf(r)) {
          const std::optional<double> ready = readyOf(run, r);
          if (!ready || *ready > run.now) break;
          const double cost = costOf(run, r);
          if (run.pos[r] < ranks_[r].size()) run.result.start[r].push_back(run.now);
          progress = true;
          if (cost > 0) {
            run.computing[r] = true;
            run.left[r] = cost;
            run.began[r] = run.now;
            break;
          }
          endItem(run, r, run.now);
        }
      }
    }
  }

  // The next moment something changes: a compute ends, or a waiting rank's input arrives
  // (infinity where nothing will); each computing rank's speed until then.
  double nextChange(SharedRun& run) const {
    double next = std::numeric_limits<double>::infinity();
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (run.computing[r]) {
        run.speed[r] = costs_.shared_cores.speedOf(r, run.computing);
        run.ends[r] = run.now + run.left[r] / run.speed[r];
        next = std::min(next, run.ends[r]);
      } else if (run.pos[r] < itemsOf(r)) {
        const std::optional<double> ready = readyOf(run, r);
        if (ready) next = std::min(next, *ready);
      }
    }
    return next;
  }

  // The computes that end by `next` end; the others do their work until then.
  void advanceTo(SharedRun& run, double next) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (!run.computing[r]) continue;
      if (run.ends[r] <= next) {
        if (run.pos[r] < ranks_[r].size()) run.result.busy[r] += next - run.began[r];
        run.computing[r] = false;
        endItem(run, r, next);
      } else {
        run.left[r] -= run.speed[r] * (next - run.now);
      }
    }
    run.now = next;
  }

  void failOnStuck(const std::vector<size_t>& pos) const {
    std::vector<Mark> stuck;
    for (size_t r = 0; r < pos.size(); ++r) {
      if (pos[r] < ranks_[r].size()) stuck.push_back({r, pos[r]});
    }
    if (!stuck.empty()) {
      fail(ranks_, stuck,
           detail::concat("deadlock: ", stuck.size(), " of ", pos.size(),
                          " ranks wait forever (marked)"));
    }
  }

  std::optional<double> done(const Action& a) const {
    const auto it = finished_.find(a);
    return it == finished_.end() ? std::nullopt : std::optional<double>(it->second);
  }
  // When the gradient of stage s's input for micro-batch m exists (its B or I finished).
  std::optional<double> gradDone(int s, int m) const {
    if (auto b = done(backwardOf(s, m))) return b;
    return done(inputGradOf(s, m));
  }
  std::optional<double> arrival(ActionKind send, int s, int m) const {
    const auto sent = done({send, s, m});
    // A forward goes from s to s + 1, a gradient from s to s - 1.
    const int boundary = send == ActionKind::kSendForward ? s : s - 1;
    return sent ? std::optional<double>(*sent + costs_.commOf(boundary, m)) : std::nullopt;
  }
  bool local(int a, int b) const { return req_.rank_of_stage[a] == req_.rank_of_stage[b]; }

  static std::optional<double> latest(std::initializer_list<std::optional<double>> deps) {
    double t = 0;
    for (const auto& d : deps) {
      if (!d) return std::nullopt;
      t = std::max(t, *d);
    }
    return t;
  }

  std::optional<double> readyTime(const Action& a) const {
    const int s = a.stage, m = a.microbatch;
    const int last = req_.num_stages - 1;
    switch (a.kind) {
      case ActionKind::kForward:
        if (s == 0) return 0.0;
        return local(s, s - 1) ? done(forwardOf(s - 1, m))
                               : arrival(ActionKind::kSendForward, s - 1, m);
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        if (s == last) return done(forwardOf(s, m));
        const auto grad =
            local(s, s + 1) ? gradDone(s + 1, m) : arrival(ActionKind::kSendBackward, s + 1, m);
        return latest({done(forwardOf(s, m)), grad});
      }
      case ActionKind::kBackwardWeight: return done(inputGradOf(s, m));
      case ActionKind::kSendForward: return done(forwardOf(s, m));
      case ActionKind::kSendBackward: return gradDone(s, m);
      default: return 0.0;  // RECV: posting needs nothing
    }
  }

  const ScheduleRequest& req_;
  const std::vector<ActionList>& ranks_;
  const ActionCosts& costs_;
  std::map<Action, double> finished_;
};

std::vector<int> peakInflight(const ScheduleRequest& req, const std::vector<ActionList>& ranks) {
  std::vector<int> live(req.num_stages, 0), peak(req.num_stages, 0);
  for (const ActionList& list : ranks) {
    for (const Action& a : list) {
      if (a.kind == ActionKind::kForward) {
        peak[a.stage] = std::max(peak[a.stage], ++live[a.stage]);
      } else if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardWeight) {
        --live[a.stage];
      }
    }
  }
  return peak;
}

// Per (sender, receiver): the messages in sending order equal those in receiving order.
bool inOrderPerPair(const ScheduleRequest& req, const std::vector<ActionList>& ranks) {
  std::map<std::pair<int, int>, std::vector<Action>> sent, received;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const Action& a : ranks[r]) {
      const int me = static_cast<int>(r);
      switch (a.kind) {
        case ActionKind::kSendForward:
          sent[{me, req.rank_of_stage[a.stage + 1]}].push_back(
              {ActionKind::kForward, a.stage, a.microbatch});
          break;
        case ActionKind::kSendBackward:
          sent[{me, req.rank_of_stage[a.stage - 1]}].push_back(
              {ActionKind::kBackward, a.stage, a.microbatch});
          break;
        case ActionKind::kRecvForward:
          received[{req.rank_of_stage[a.stage - 1], me}].push_back(
              {ActionKind::kForward, a.stage - 1, a.microbatch});
          break;
        case ActionKind::kRecvBackward:
          received[{req.rank_of_stage[a.stage + 1], me}].push_back(
              {ActionKind::kBackward, a.stage + 1, a.microbatch});
          break;
        default: break;
      }
    }
  }
  return sent == received;
}

}  // namespace

SimulationResult simulateSchedule(const ScheduleRequest& request,
                                  const std::vector<ActionList>& ranks, const ActionCosts& costs) {
  const Positions where = checkStructure(request, ranks);
  checkComputeCoverage(request, ranks, where);
  checkCommunication(request, ranks, where);
  SimulationResult result = Simulation(request, ranks, costs).run();
  double idle = 0;
  for (double busy : result.busy) {
    result.idle.push_back(result.makespan - busy);
    idle += result.idle.back();
  }
  const double capacity = result.makespan * static_cast<double>(ranks.size());
  result.bubble_fraction = capacity > 0 ? idle / capacity : 0;
  result.peak_inflight = peakInflight(request, ranks);
  result.in_order_per_pair = inOrderPerPair(request, ranks);
  return result;
}

std::string renderTimeline(const ScheduleRequest& request, const std::vector<ActionList>& ranks,
                           const SimulationResult& result, const ActionCosts& costs) {
  double unit = 0;
  for (double c : {costs.forward, costs.backward, costs.input_grad, costs.weight_grad}) {
    if (c > 0 && (unit == 0 || c < unit)) unit = c;
  }
  if (unit == 0) unit = 1;
  const auto columns = static_cast<size_t>(std::ceil(result.makespan / unit - 1e-9));
  const bool show_stage = request.stages_per_rank > 1;
  std::vector<std::vector<std::string>> cells(ranks.size(), std::vector<std::string>(columns, "."));
  size_t width = 1;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (size_t p = 0; p < ranks[r].size(); ++p) {
      const Action& a = ranks[r][p];
      const double cost = costs.of(a.kind, a.stage, a.microbatch);
      if (cost <= 0) continue;
      const std::string label = (show_stage ? std::to_string(a.stage) : "") + kindName(a.kind) +
                                std::to_string(a.microbatch);
      width = std::max(width, label.size());
      const auto first = static_cast<size_t>(std::llround(result.start[r][p] / unit));
      const auto last = static_cast<size_t>(std::llround((result.start[r][p] + cost) / unit));
      for (size_t c = first; c < last && c < columns; ++c) cells[r][c] = label;
    }
  }
  std::ostringstream out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    out << "rank " << r << " |";
    for (const std::string& cell : cells[r])
      out << ' ' << cell << std::string(width - cell.size(), ' ');
    out << '\n';
  }
  return out.str();
}

}  // namespace ppstage
