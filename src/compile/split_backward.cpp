// See include/ppstage/compile/split_backward.h, Note [Eager I/W split].
#include "ppstage/compile/split_backward.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ppstage/core/error.h"

namespace ppstage {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;

namespace {

// The node a tensor's gradient flows into: its grad_fn, or a leaf's accumulator (null when
// the leaf was never used by an op that records autograd).
Node* gradientNode(const at::Tensor& t) {
  if (t.grad_fn()) return t.grad_fn().get();
  return torch::autograd::impl::try_get_grad_accumulator(t).get();
}

// Keeps the gradients arriving at a frontier node while armed (during I).
struct Capture {
  bool armed = true;
  bool seen = false;
  variable_list grads;
};

class CapturePreHook : public torch::autograd::FunctionPreHook {
 public:
  explicit CapturePreHook(std::shared_ptr<Capture> capture) : capture_(std::move(capture)) {}
  variable_list operator()(const variable_list& grads) override {
    if (capture_->armed) {
      capture_->grads = grads;
      capture_->seen = true;
    }
    return grads;
  }

 private:
  std::shared_ptr<Capture> capture_;
};

// The graph reachable from the roots: for every node, whether it leads to one of the
// inputs' nodes and whether to one of the weights' (iterative post-order: deep graphs).
struct GraphReach {
  struct Reach {
    bool input = false;
    bool weight = false;
  };
  std::unordered_map<Node*, Reach> reach;
  std::unordered_map<Node*, std::shared_ptr<Node>> owner;  // keeps the nodes alive
  std::vector<Node*> order;                                // children before parents

  GraphReach(const std::vector<std::shared_ptr<Node>>& roots,
             const std::unordered_set<Node*>& inputs, const std::unordered_set<Node*>& weights) {
    std::vector<std::pair<Node*, size_t>> stack;  // node, next edge to visit
    for (const auto& root : roots) {
      if (!root || reach.count(root.get()) > 0) continue;
      owner[root.get()] = root;
      reach[root.get()];
      stack.emplace_back(root.get(), 0);
      while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (next < node->num_outputs()) {
          const Edge& edge = node->next_edge(next++);
          Node* child = edge.function.get();
          if (child != nullptr && reach.count(child) == 0) {
            owner[child] = edge.function;
            reach[child];
            stack.emplace_back(child, 0);
          }
          continue;
        }
        Reach& r = reach[node];
        r.input = inputs.count(node) > 0;
        r.weight = weights.count(node) > 0;
        for (const Edge& edge : node->next_edges()) {
          if (!edge.function) continue;
          const Reach& c = reach[edge.function.get()];
          r.input = r.input || c.input;
          r.weight = r.weight || c.weight;
        }
        order.push_back(node);
        stack.pop_back();
      }
    }
  }
};

}  // namespace

struct SplitBackward::Impl {
  // W's start: edges into the graph and the gradients flowing in there.
  edge_list roots;
  variable_list root_grads;
  // Frontier nodes with what I left at each.
  std::vector<std::pair<std::shared_ptr<Node>, std::shared_ptr<Capture>>> frontier;
  edge_list weight_edges;
  std::vector<bool> has_edge;  // per weight: whether it is in the graph at all
  bool input_done = false;

  // The weights' accumulators: W's outputs.
  std::unordered_set<Node*> findWeights(const std::vector<at::Tensor>& weights) {
    std::unordered_set<Node*> nodes;
    for (const at::Tensor& w : weights) {
      const auto accumulator = torch::autograd::impl::try_get_grad_accumulator(w);
      has_edge.push_back(accumulator != nullptr);
      if (accumulator) {
        nodes.insert(accumulator.get());
        weight_edges.emplace_back(accumulator, 0);
      }
    }
    return nodes;
  }

  // Hooks the frontier: nodes of I's region with an edge to a node outside it that leads
  // to a weight. Roots outside I's region start W themselves.
  void hookFrontier(const GraphReach& graph, const std::vector<at::Tensor>& roots,
                    const std::vector<at::Tensor>& grads) {
    for (Node* node : graph.order) {
      if (!graph.reach.at(node).input) continue;
      for (const Edge& edge : node->next_edges()) {
        if (!edge.function) continue;
        const GraphReach::Reach& child = graph.reach.at(edge.function.get());
        if (!child.input && child.weight) {
          auto capture = std::make_shared<Capture>();
          node->add_pre_hook(std::make_unique<CapturePreHook>(capture));
          frontier.emplace_back(graph.owner.at(node), capture);
          break;
        }
      }
    }
    for (size_t i = 0; i < roots.size(); ++i) {
      const Edge root = torch::autograd::impl::gradient_edge(roots[i]);
      const GraphReach::Reach& reach = graph.reach.at(root.function.get());
      if (!reach.input && reach.weight) {
        this->roots.push_back(root);
        root_grads.push_back(grads[i]);
      }
    }
  }

  // After I, which ran its whole region: W starts at the frontier with what arrived there,
  // the frontier's edges into the region are cut so that W runs none of it again, and the
  // rest of the region lets go of what it saved for backward (activations I needed).
  void cutFrontier(const GraphReach& graph) {
    std::unordered_set<Node*> kept;
    for (auto& [node, capture] : frontier) {
      PPSTAGE_INTERNAL_ASSERT(capture->seen, "I did not run a node of its region (", node->name(),
                              "): W would miss its weights' gradients");
      capture->armed = false;
      kept.insert(node.get());
      // Directly, not through set_next_edge: that one refuses nodes with parents, to keep
      // topological numbers decreasing, which dropping an edge cannot break.
      for (Edge& edge : node->next_edges()) {
        if (edge.function && graph.reach.at(edge.function.get()).input) edge = Edge();
      }
      for (size_t i = 0; i < capture->grads.size(); ++i) {
        if (!capture->grads[i].defined()) continue;
        roots.emplace_back(node, static_cast<uint32_t>(i));
        root_grads.push_back(capture->grads[i]);
      }
      capture->grads.clear();
    }
    for (Node* node : graph.order) {
      if (graph.reach.at(node).input && kept.count(node) == 0) node->release_variables();
    }
  }
};

SplitBackward::SplitBackward() : impl_(std::make_unique<Impl>()) {}
SplitBackward::~SplitBackward() = default;

std::vector<at::Tensor> SplitBackward::inputGradients(const std::vector<at::Tensor>& roots,
                                                      const std::vector<at::Tensor>& root_grads,
                                                      const std::vector<at::Tensor>& inputs,
                                                      const std::vector<at::Tensor>& weights) {
  Impl& impl = *impl_;
  PPSTAGE_INTERNAL_ASSERT(!impl.input_done, "SplitBackward: I twice");
  PPSTAGE_INTERNAL_ASSERT(roots.size() == root_grads.size(), "SplitBackward: ", roots.size(),
                          " roots and ", root_grads.size(), " gradients");
  impl.input_done = true;
  std::vector<std::shared_ptr<Node>> root_nodes;
  for (size_t i = 0; i < roots.size(); ++i) {
    PPSTAGE_INTERNAL_ASSERT(root_grads[i].defined(), "SplitBackward: root ", i, " has no gradient");
    // A leaf root is a stage input passed straight through to an output: its accumulator
    // (made here when no op used the input, before the inputs' nodes are looked up).
    root_nodes.push_back(torch::autograd::impl::gradient_edge(roots[i]).function);
  }
  std::unordered_set<Node*> input_nodes;
  for (const at::Tensor& t : inputs) {
    PPSTAGE_INTERNAL_ASSERT(t.is_leaf(), "SplitBackward: an input that is not a leaf");
    if (Node* node = gradientNode(t)) input_nodes.insert(node);
  }
  const GraphReach graph(root_nodes, input_nodes, impl.findWeights(weights));
  impl.hookFrontier(graph, roots, root_grads);
  std::vector<at::Tensor> grads(inputs.size());
  if (!inputs.empty() && !roots.empty()) {
    grads = torch::autograd::grad(roots, inputs, root_grads, /*retain_graph=*/true,
                                  /*create_graph=*/false, /*allow_unused=*/true);
  }
  impl.cutFrontier(graph);
  return grads;
}

std::vector<at::Tensor> SplitBackward::weightGradients() {
  Impl& impl = *impl_;
  PPSTAGE_INTERNAL_ASSERT(impl.input_done, "SplitBackward: W before I");
  std::vector<at::Tensor> out(impl.has_edge.size());
  if (impl.roots.empty() || impl.weight_edges.empty()) return out;
  const variable_list grads = torch::autograd::Engine::get_default_engine().execute(
      impl.roots, impl.root_grads, /*keep_graph=*/false, /*create_graph=*/false,
      /*accumulate_grad=*/false, impl.weight_edges);
  size_t k = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (impl.has_edge[i]) out[i] = grads.at(k++);
  }
  impl.roots.clear();
  impl.root_grads.clear();
  impl.frontier.clear();
  return out;
}

}  // namespace ppstage
