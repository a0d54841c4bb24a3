// Validator and simulator, run on every schedule before it executes.
//
// Given per-action costs (defaults F=1, B=2, I=1, W=1, or measured ones), it checks the
// schedule's structure, then runs every rank's list in order — an action starts when its
// rank is free and its inputs exist: the forward of the previous stage (or the message
// carrying it), the F it differentiates, the gradient from the next stage — and reports
// the makespan, each rank's idle time, the bubble fraction and the peak number of
// micro-batches whose activations are alive on each stage. A schedule whose ranks can all
// get stuck waiting is a deadlock.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ppstage/core/error.h"
#include "ppstage/schedule/per_kind.h"
#include "ppstage/schedule/schedule_api.h"

namespace ppstage {

// Ranks that compute on fewer cores than they run threads (Note [Ranks that share cores] in
// src/schedule/action_costs.cpp): per machine, its cores and the compute threads each
// pipeline rank runs there (those of its replicas and tensor-parallel ranks), and the share
// of a core each thread had while the costs were measured. Empty: every rank computes at
// the speed its costs were measured at.
struct SharedCores {
  std::vector<double> cores;                 // per machine
  std::vector<std::vector<double>> threads;  // per machine, per pipeline rank
  double measured_share = 1;                 // in (0, 1]
  // Where not empty (one per pipeline rank), what each rank does after its actions in a
  // step, inside the makespan (Note [A step's tail on shared cores] in
  // src/schedule/simulator.cpp), while the others may still run theirs:
  //   - sums its gradients with the ranks holding copies of them (the data-parallel
  //     all-reduce, tied weights' sums): waits tail_wait (what slow links add), then
  //     computes tail_sum (the sums' copying and adding on its cores); either empty: none;
  //   - once every rank has summed and the step's all-reduce of losses and norms has
  //     joined them all (tail_join, a wait), steps its optimizer: computes tail_compute.
  // What a rank computes is work at the speed it measured, as its actions.
  std::vector<double> tail_wait;
  std::vector<double> tail_sum;
  std::vector<double> tail_compute;
  double tail_join = 0;
  // Where not empty (one per pipeline rank), the other ranks whose actions must end before
  // that rank's sums begin: those it sums a tied weight's copies with.
  std::vector<std::vector<size_t>> tail_after;

  bool empty() const { return cores.empty(); }
  // How many times faster than measured pipeline rank `rank` computes while the ranks
  // marked in `computing` (its own among them) compute: the smallest over its machines of
  // min(1, cores / the threads computing there) / measured_share.
  double speedOf(size_t rank, const std::vector<bool>& computing) const;
};

struct ActionCosts {
  double forward = 1;
  double backward = 2;
  double input_grad = 1;   // I
  double weight_grad = 1;  // W
  double comm = 0;         // from a SEND to its data being usable by the receiver
  // When not empty, the comm of the messages between stage s and s + 1 (either way), per
  // boundary s, in place of `comm`: a boundary between hosts costs more than one inside a
  // host (plan/planner.h, Note [Links in the plan]).
  std::vector<double> boundary_comm;
  // Tensor parallelism: the seconds one stage's all-reduces over its TP group take in one
  // micro-batch's forward (F) and backward (B, or I, which carries the region entries'
  // gradient sums). They block inside the action, so they lengthen it.
  double tp_forward = 0;
  double tp_backward = 0;
  // When not empty, stage s's compute costs, per stage (what a run measured), in place of
  // the four above.
  std::vector<PerCompute<double>> per_stage;
  // Micro-batches of different lengths (--data.seq_len_policy): when not empty, micro-batch
  // m's compute costs are the above times microbatch_scale[m], and its messages' comm
  // times message_scale[m].
  std::vector<double> microbatch_scale;
  std::vector<double> message_scale;
  // When not empty, a compute action's cost is the work it does at the speed it was
  // measured at, and it takes longer or shorter as the ranks beside it compute or wait.
  SharedCores shared_cores;

  double of(ActionKind kind) const;             // communication actions take no rank time
  double of(ActionKind kind, int stage) const;  // per_stage's when set
  // of(kind, stage), scaled for `microbatch` (microbatch_scale's when set).
  double of(ActionKind kind, int stage, int microbatch) const;
  // comm (boundary_comm's of boundary `boundary` when set), scaled for `microbatch`
  // (message_scale's).
  double commOf(int boundary, int microbatch) const;
  // "1,2,1,1" (F,B,I,W). Throws ppstage::Error.
  static ActionCosts parse(const std::string& text);
  // Sets tp_forward and tp_backward from "0.1,0.2" (--tp_costs F,B). Throws ppstage::Error.
  void parseTensorParallel(const std::string& text);
};

struct SimulationResult {
  double makespan = 0;
  std::vector<double> busy;                // per rank
  std::vector<double> idle;                // per rank: makespan - busy
  double bubble_fraction = 0;              // total idle / (ranks * makespan)
  std::vector<int> peak_inflight;          // per stage: micro-batches alive (F done, B/W not)
  std::vector<std::vector<double>> start;  // per rank, per action: when it starts
  // Every pair of ranks receives messages in the order they were sent (what NCCL, which
  // matches in posting order, needs; MPI matches by tag).
  bool in_order_per_pair = true;
};

// An invalid schedule: what() is one line; grid() shows every rank's actions with the
// problem marked [like this].
class ScheduleError : public Error {
 public:
  ScheduleError(const std::string& summary, std::string grid)
      : Error(summary), grid_(std::move(grid)) {}
  const std::string& grid() const { return grid_; }

 private:
  std::string grid_;
};

// Validates and simulates `ranks` (communication actions included, see lowering.h).
// Throws ScheduleError when an action runs on the wrong rank or names a stage or
// micro-batch that does not exist; when a (stage, micro-batch) lacks its F or its B (or
// I and W), or has one twice; when a SEND has no matching RECV or the reverse, or a
// remote input is used without a RECV before it; and when the ranks deadlock.
SimulationResult simulateSchedule(const ScheduleRequest& request,
                                  const std::vector<ActionList>& ranks,
                                  const ActionCosts& costs = {});

// One row per rank, one column per time unit (the cheapest compute cost), each action's
// label repeated over its cost (not what shared cores make of it); idle units are '.'.
std::string renderTimeline(const ScheduleRequest& request, const std::vector<ActionList>& ranks,
                           const SimulationResult& result, const ActionCosts& costs);

}  // namespace ppstage
