// See include/ppstage/compile/split_autodiff.h.
//
// Note [Compiled backward and the I/W split]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A profiling GraphExecutor differentiates a graph for itself: its differentiable regions
// become DifferentiableGraph ops, each recording one DifferentiableGraphBackward node that
// runs the region's whole backward graph whichever gradients are wanted. Zero-bubble
// schedules want them in two parts, I (the stage input's gradient, on the critical path)
// and W (the weights', later); with one node per region, I and W each run it whole, and
// I + W cost 1.3-1.4 backwards (docs/benchmarks.md). So when autograd records, modes
// stage and block differentiate ahead of time instead:
//
//   1. Which values require grad is set from the first call's inputs (a change compiles
//      again: it is in the cache's key) and propagated through the graph.
//   2. TorchScript's CreateAutodiffSubgraphs groups the ops with a symbolic gradient into
//      regions; each becomes a ppstage::split_graph node, marked with which of its inputs
//      are weights (stage parameters). Ops without one stay between regions and record
//      autograd as eager ops do: ppstage's keyed dropout, masked_fill with a scalar,
//      slicing, list unpacking.
//   3. As the node is made (split_gradient.cpp), the region is differentiated
//      (torch::jit::differentiate: a forward graph that also returns what the backward
//      reads, and a backward graph), and the backward is cut by dead-code elimination
//      (backward_cut.cpp): I's graph is everything the activations' gradients need, and
//      also returns what the weights' gradients read that it computed; W's graph is the
//      rest. A forward op's gradient section (one prim::GradOf node) computing both an
//      activation's and a weight's gradient is copied into both, each copy keeping only
//      what its gradients need (an mm's two products go apart; a layer norm's one backward
//      op runs in both). Forward, I and W run through profiling executors of their own,
//      which optimize them as TorchScript optimizes any graph. (CreateAutodiffSubgraphs
//      keeps a region's outputs from aliasing its inputs, which the nodes below rely on.)
//   4. A call runs the forward without recording autograd and gives its outputs two
//      autograd nodes: I's (edges to the activations' producers, and one to W's node,
//      carrying a token) and W's (edges to the weights' accumulators). One backward runs
//      both, in that order. The I/W split (Note [Eager I/W split]) needs nothing of its
//      own: I's node reaches the stage input, so it is in I's region, and W's does not;
//      the edge between them is a frontier edge. I runs I's node, which keeps what W reads
//      and the gradients that engine run did not take (the token, and any edge towards a
//      weight through eager ops); when W runs the engine from the frontier, I's node
//      returns those without running again, and W's node runs W's graph.
//
// The top-level graph (regions and what lies between) runs on a simple executor, as in
// mode none; the regions are optimized inside. In block mode each segment is split this
// way and identical blocks share the split graph, and so its forward, I and W executors.
// With grad mode off (or nothing requiring grad) the stage's graph runs as before, on one
// profiling executor. A region differentiate fails on is put back inline and records eager
// autograd (the rank warns once). A backward's second run over one forward (retain_graph)
// is refused.
#include "ppstage/compile/split_autodiff.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/create_autodiff_subgraphs.h>
#include <torch/csrc/jit/passes/utils/subgraph_utils.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>

#include "ppstage/core/error.h"
#include "split_gradient.h"

namespace ppstage {

namespace {

using torch::jit::Node;
using torch::jit::Value;
namespace jit = torch::jit;

// `type` with requires_grad set, where it is a Tensor. A list keeps its type (lists are
// invariant: a Tensor[] of refined tensors would no longer match aten::cat's schema), and
// so counts as requiring grad.
c10::TypePtr withRequiresGrad(const c10::TypePtr& type, bool requires_grad) {
  if (const auto t = type->cast<c10::TensorType>()) return t->withRequiresGrad(requires_grad);
  return type;
}

bool neverRequiresGrad(const Node* n) {
  static const std::vector<c10::Symbol> kinds = {
      c10::aten::eq,     c10::aten::ne,   c10::aten::lt,         c10::aten::le,
      c10::aten::gt,     c10::aten::ge,   c10::aten::detach,     c10::aten::argmax,
      c10::aten::argmin, c10::aten::size, c10::prim::NumToTensor};
  return std::find(kinds.begin(), kinds.end(), n->kind()) != kinds.end();
}

// Forward: an output requires grad when an input does (over-approximated where dtypes are
// unknown; an integral output of a region takes no gradient at run time).
void propagateRequiresGrad(jit::Block* block) {
  for (Node* n : block->nodes()) {
    for (jit::Block* b : n->blocks()) propagateRequiresGrad(b);
    bool any = false;
    for (Value* v : n->inputs()) any = any || v->requires_grad();
    for (jit::Block* b : n->blocks()) {
      for (Value* v : b->outputs()) any = any || v->requires_grad();
    }
    if (neverRequiresGrad(n)) any = false;
    for (Value* v : n->outputs()) v->setType(withRequiresGrad(v->type(), any));
  }
}

// The DifferentiableGraph node `dg` replaced by a split_graph node; false (and `dg` put
// back inline, to record eager autograd) where TorchScript cannot differentiate it.
bool toSplitGraph(jit::Graph& graph, Node* dg, const std::vector<bool>& weight_input,
                  std::string& why) {
  std::vector<bool> weight;
  for (Value* v : dg->inputs()) {
    weight.push_back(v->node() == graph.param_node() && weight_input.at(v->offset()));
  }
  c10::IValue gradient;
  try {
    gradient = compile_detail::makeSplitGradient(dg->g(c10::attr::Subgraph), std::move(weight));
  } catch (const compile_detail::NotDifferentiable& e) {
    why = e.what();
    jit::SubgraphUtils::unmergeSubgraph(dg);
    return false;
  }
  Node* split = graph.create(compile_detail::splitGraphKind(), dg->inputs(), dg->outputs().size());
  split->ival_(compile_detail::gradientAttr(), gradient);
  split->insertBefore(dg);
  for (size_t i = 0; i < dg->outputs().size(); ++i) {
    split->output(i)->copyMetadata(dg->output(i));
    dg->output(i)->replaceAllUsesWith(split->output(i));
  }
  dg->destroy();
  return true;
}

}  // namespace

std::shared_ptr<jit::Graph> splitAutodiff(const std::shared_ptr<jit::Graph>& graph,
                                          const AutodiffInputs& inputs, std::string* eager_why) {
  compile_detail::registerSplitGraphOperator();
  std::shared_ptr<jit::Graph> g = graph->copy();
  PPSTAGE_INTERNAL_ASSERT(inputs.requires_grad.size() == g->inputs().size() &&
                              inputs.weight.size() == g->inputs().size(),
                          "splitAutodiff: one flag per graph input");
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    Value* v = g->inputs()[i];
    v->setType(withRequiresGrad(v->type(), inputs.requires_grad[i]));
  }
  propagateRequiresGrad(g->block());
  for (Node* dg : jit::CreateAutodiffSubgraphs(g)) {
    std::string why;
    if (!toSplitGraph(*g, dg, inputs.weight, why) && eager_why != nullptr && eager_why->empty()) {
      *eager_why = why.substr(0, why.find('\n'));
    }
  }
  return g;
}

namespace {

int64_t countIn(const jit::Block* block) {
  int64_t count = 0;
  for (const Node* n : block->nodes()) {
    count += n->kind() == compile_detail::splitGraphKind() ? 1 : 0;
    for (const jit::Block* b : n->blocks()) count += countIn(b);
  }
  return count;
}

}  // namespace

int64_t countSplitGraphs(const jit::Graph& graph) { return countIn(graph.block()); }

}  // namespace ppstage
