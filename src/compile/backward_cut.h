// A backward graph cut in two by dead-code elimination: the part that computes the
// activations' gradients (I) and the part that computes only the weights' (W). Part of
// Note [Compiled backward and the I/W split] (split_autodiff.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace torch::jit {
struct Graph;
}  // namespace torch::jit

namespace ppstage::compile_detail {

struct BackwardCut {
  // The backward's inputs -> the gradients `input_outputs` names, then the values W reads
  // that I computes (handoff entries not from the backward's inputs, in order).
  std::shared_ptr<torch::jit::Graph> input_graph;
  // handoff values -> the gradients `weight_outputs` names.
  std::shared_ptr<torch::jit::Graph> weight_graph;
  std::vector<size_t> input_outputs;   // the backward's outputs input_graph computes
  std::vector<size_t> weight_outputs;  // the backward's outputs weight_graph computes
  // One per weight_graph input: a backward input (`index` into its inputs), or one of
  // input_graph's outputs after its gradients (`index` among those).
  struct Source {
    bool backward_input;
    size_t index;
  };
  std::vector<Source> handoff;
};

// Cuts `backward` (left unchanged): I's part is every node its outputs need, W's the rest
// (constants are copied into W where it needs them too), so I + W does the backward's work
// once, except what a forward op's gradient section computes for both its activation's and
// its weight's gradient (see splitMixedIfs). `weight[k]`: whether output k is a weight's
// gradient.
BackwardCut cutBackward(torch::jit::Graph& backward, const std::vector<bool>& weight);

}  // namespace ppstage::compile_detail
