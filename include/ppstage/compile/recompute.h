// Activation recomputation: which blocks drop what their forward saved for backward and
// compute it again in their backward (--train.recompute, --train.recompute_blocks), and
// the autograd node that does it.
//
// Note [Recomputed segments]
// A recomputed block is one segment of its stage (segments.h). Its forward runs on leaves
// of its inputs, recording autograd as the rerun will (ops pick kernels by requires_grad:
// the values must be bitwise the rerun's), and that graph is dropped with the block's end:
// nothing it computes inside stays alive for backward. One node of our own
// (RecomputeNode in src/compile/recompute.cpp) stands for it in the autograd graph: its
// edges lead to the segment's tensor inputs, it is the grad_fn of its tensor outputs, and
// it keeps the inputs (those of the segment's inputs that are not the next segment's
// anyway: the block's input activation and its weights). Its backward sets the random
// stream the forward ran under (keyed random ops draw the same dropout masks again), runs
// the segment again recording autograd on detached copies of its inputs, then
// differentiates that:
//   B   all the gradients its inputs need, at once.
//   I   (a zero-bubble schedule's input gradients; SplitBackward finds this node on I's
//       frontier, as it has edges to weights) the input gradients through a SplitBackward
//       of its own over the rerun's graph, which it keeps: W then asks this node for its
//       weights' gradients and gets them from that split, with no second rerun.
// Selective recomputation runs every op of the block in the rerun but keeps the outputs
// of matrix products, convolutions and attention kernels from the first forward instead of
// computing them again; see Note [Selective recomputation] in src/compile/recompute.cpp.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"

namespace ppstage {

struct RecomputeStats;
class TraceRecorder;

// --train.recompute and --train.recompute_blocks resolved against a model's blocks.
class RecomputeChoice {
 public:
  RecomputeChoice() = default;  // nothing recomputes
  // `blocks`: findBlocks over `model` (segments.h). Throws ppstage::Error, one line, for a
  // bad --train.recompute_blocks, a pattern that matches no block, and recomputation on a
  // model without blocks (with the reason).
  RecomputeChoice(RecomputePolicy policy, const std::string& spec, const ModelGraph& model,
                  const std::vector<bool>& blocks);

  RecomputePolicy policy() const { return policy_; }
  bool any() const { return policy_ != RecomputePolicy::kNone; }
  // Whether the block that is call `call` of the model, the `index_in_stage`-th block (from
  // 0) of stage `stage`, recomputes.
  bool recomputes(int call, int stage, int index_in_stage) const;

 private:
  RecomputePolicy policy_ = RecomputePolicy::kNone;
  std::vector<bool> by_call_;             // a pattern, every:N or all: per model call
  std::vector<int64_t> count_per_stage_;  // a count: per stage (the last for the rest)
};

using SegmentRun = std::function<std::vector<c10::IValue>(std::vector<c10::IValue>)>;

// How a recomputed segment runs again in its backward: its graph with one input per
// reader (inputPerReader, segments.h), and which segment input each of those reads.
struct RecomputedRerun {
  SegmentRun run;
  std::vector<size_t> sources;
};

// Runs a recomputed segment's forward (Note [Recomputed segments]): `run` computes the
// segment's outputs from its inputs, recording autograd when grad mode is on, and
// `rerun` the same for the backward. With grad mode off, or no tensor input requiring
// grad, `run` is simply called. `block` names the block in errors. The stats (and the
// trace, unless null) get every rerun; both must outlive the autograd graph.
std::vector<c10::IValue> runRecomputed(const std::vector<c10::IValue>& inputs,
                                       const SegmentRun& run, RecomputedRerun rerun,
                                       const std::string& block, RecomputeStats& stats,
                                       TraceRecorder* trace);

}  // namespace ppstage
