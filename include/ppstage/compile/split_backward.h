// The backward of one (stage, micro-batch) in two parts that together cost one backward:
// I, the gradients of the stage's inputs, now (they are on the pipeline's critical path),
// and W, the gradients of its weights, later (zero-bubble schedules fill bubbles with it).
//
// Note [Eager I/W split]
// Two plain autograd::grad calls (inputs with retain_graph, then weights) cost about two
// backwards: W walks the graph again from the roots. Instead, before I runs, the autograd
// graph is walked from the roots and every node marked that leads to an input's gradient:
// I's region, all the engine runs for I, each node computing only the outputs that lead to
// an input (so an addmm computes the gradient of its activation, not of its weight). The
// nodes of I's region with an edge out of it towards a weight (the addmm, a layer norm,
// the add where a residual branch from a weight joins) are the frontier: a pre-hook on
// each keeps the gradients arriving there during I. After I, the frontier's edges into
// I's region are cut (I is done with them), and W runs the engine from the frontier with
// those gradients, and from the roots outside I's region (all of them, for a stage whose
// inputs need no gradient), towards the weights only: each frontier node computes only
// its weight outputs, and nothing of I's region runs again. Gradients reaching a weight
// from several frontier nodes add up in the engine as in one backward.
//
// The split follows the autograd graph as it is. In compile modes stage and block each
// compiled region records two nodes of its own, an input-gradient one and a
// weight-gradient one (Note [Compiled backward and the I/W split] in
// src/compile/split_autodiff.cpp), so the same walk splits them and I + W costs one
// backward there too.
// After I, the nodes of I's region other than the frontier release what they saved (the
// activations only I needed), so between I and W a micro-batch holds the frontier's saved
// tensors (a weight op's input) and the gradients captured there.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace ppstage {

class SplitBackward {
 public:
  SplitBackward();
  ~SplitBackward();
  SplitBackward(const SplitBackward&) = delete;
  SplitBackward& operator=(const SplitBackward&) = delete;

  // I: the gradients of `inputs` (undefined where none reaches one) from `roots` and the
  // gradients flowing into them (`root_grads`, one each, defined). Keeps what W needs of
  // the graph, and lets the rest of I's region free what it saved. Once; throws c10::Error
  // when autograd fails. The inputs are leaves (received or handed-over activations); a
  // root may be one of them (an input passed straight through); the graph carries no hooks
  // of its own (they would run again in W). Not thread-safe; a split whose W never runs frees
  // everything with the graph.
  std::vector<at::Tensor> inputGradients(const std::vector<at::Tensor>& roots,
                                         const std::vector<at::Tensor>& root_grads,
                                         const std::vector<at::Tensor>& inputs,
                                         const std::vector<at::Tensor>& weights);

  // W, once, after I: the gradients of the `weights` given to I (undefined where none
  // reaches one), the same values one backward computes. Frees the graph's W part.
  std::vector<at::Tensor> weightGradients();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppstage
