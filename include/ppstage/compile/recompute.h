// Activation recomputation (--train.recompute): a block drops what its forward saved for
// backward and computes it again in its backward. Which blocks: recompute_choice.h.
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
// Selective recomputation cuts a block into pieces first (ModelCompiler): the ops whose
// outputs it keeps (matrix products with a weight, convolutions, attention kernels) run
// as usual, and each run of ops between them is a recomputed segment of its own.
// The node checks, before a rerun, that no kept input was changed in place since the
// forward (as autograd's saved tensors do), and its rerun seconds are the host's clock: on
// a GPU, the kernels' launches.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <vector>

namespace ppstage {

struct RecomputeStats;
class TraceRecorder;

// A segment's graph run on its inputs, recording autograd when grad mode is on.
using SegmentRun = std::function<std::vector<c10::IValue>(std::vector<c10::IValue>)>;

// A recomputed segment as it runs, forward and rerun alike: its graph with one input per
// reader (inputPerReader, segments.h; Note [Recomputed gradients add up as before] in
// src/compile/recompute.cpp), and which of the segment's inputs each of those reads.
struct RecomputedSegment {
  SegmentRun run;
  std::vector<size_t> sources;
};

// Runs a recomputed segment's forward on the segment's `inputs` (Note [Recomputed
// segments]). With grad mode off, or no tensor input requiring grad, it simply runs.
// `block` names the block in errors. The stats (and the trace, unless null) get every
// rerun; both, and `segment.run`'s graph, must outlive the autograd graph.
std::vector<c10::IValue> runRecomputed(const std::vector<c10::IValue>& inputs,
                                       const RecomputedSegment& segment, const std::string& block,
                                       RecomputeStats& stats, TraceRecorder* trace);

}  // namespace ppstage
