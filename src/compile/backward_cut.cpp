// See backward_cut.h.
#include "backward_cut.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ppstage/core/error.h"

namespace ppstage::compile_detail {

namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// The values of `top` that `node` reads, its blocks' reads included (a backward's GradOf
// sections are lowered to prim::If blocks).
void readsOf(Node* node, const Block* top, std::vector<Value*>& out) {
  for (Value* v : node->inputs()) {
    if (v->node()->owningBlock() == top) out.push_back(v);
  }
  for (Block* b : node->blocks()) {
    for (Node* inner : b->nodes()) readsOf(inner, top, out);
    readsOf(b->return_node(), top, out);
  }
}

bool isConstant(const Node* n) { return n->kind() == c10::prim::Constant; }

// The top-level nodes `roots` need, stopping at values `stop` says another part computes;
// `needed` gets every value read.
std::unordered_set<Node*> neededNodes(Graph& g, const std::vector<Value*>& roots,
                                      const std::function<bool(Node*)>& stop,
                                      std::unordered_set<Value*>* needed_out = nullptr) {
  std::unordered_set<Value*> local;
  std::unordered_set<Value*>& needed = needed_out != nullptr ? *needed_out : local;
  needed.insert(roots.begin(), roots.end());
  std::unordered_set<Node*> nodes;
  std::vector<Value*> reads;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    Node* n = *it;
    bool wanted = false;
    for (Value* o : n->outputs()) wanted = wanted || needed.count(o) > 0;
    if (!wanted || stop(n)) continue;
    nodes.insert(n);
    reads.clear();
    readsOf(n, g.block(), reads);
    needed.insert(reads.begin(), reads.end());
  }
  return nodes;
}

// Copies `nodes` of `from` (in graph order) into `to`; `env` maps values already there and
// gains the copies' outputs; a value neither maps nor copies goes through `missing`.
void copyNodes(Graph& from, const std::unordered_set<Node*>& nodes, Graph& to,
               std::unordered_map<Value*, Value*>& env,
               const std::function<Value*(Value*)>& missing) {
  for (Node* n : from.nodes()) {
    if (nodes.count(n) == 0) continue;
    Node* copy = to.insertNode(to.createClone(n, [&](Value* v) {
      const auto it = env.find(v);
      return it != env.end() ? it->second : missing(v);
    }));
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->output(i)] = copy->output(i);
  }
}

// `node`'s outputs `drop` (indices, ascending) removed, with what computed only them.
void eraseOutputs(Node* node, const std::vector<size_t>& drop) {
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) {
    for (Block* b : node->blocks()) b->eraseOutput(*it);
    node->eraseOutput(*it);
  }
  for (Block* b : node->blocks()) torch::jit::EliminateDeadCode(b);
}

// A backward has one section per forward op (a prim::GradOf, lowered to a prim::If by its
// executor), computing the gradients of all its inputs together (an mm's, its
// activation's and its weight's). Where I needs some of a section's outputs (`needed`) and
// not the others, the section is copied: the original keeps what I needs, the copy (after
// it) the rest, each with only the nodes of its blocks its outputs need. Nodes both need
// run twice (a layer norm's one backward op).
void splitMixedIfs(Graph& g, const std::unordered_set<Value*>& needed) {
  std::vector<Node*> ifs;
  for (Node* n : g.nodes()) {
    const bool section = n->kind() == c10::prim::GradOf || n->kind() == c10::prim::If;
    if (section && n->outputs().size() > 1) ifs.push_back(n);
  }
  for (Node* n : ifs) {
    std::vector<size_t> for_i, rest;
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      (needed.count(n->output(i)) > 0 ? for_i : rest).push_back(i);
    }
    if (for_i.empty() || rest.empty()) continue;
    Node* copy = g.createClone(n, [](Value* v) { return v; });
    copy->insertAfter(n);
    for (const size_t i : rest) n->output(i)->replaceAllUsesWith(copy->output(i));
    eraseOutputs(n, rest);
    eraseOutputs(copy, for_i);
  }
}

// Fills `w` with W's part (nodes `in_w`, outputs `weight_roots`); returns the values it takes.
std::vector<Value*> copyWeightPart(Graph& backward, const std::unordered_set<Node*>& in_w,
                                   const std::vector<Value*>& weight_roots, Graph& w) {
  std::unordered_map<Value*, Value*> w_env;
  std::vector<Value*> handoff;
  const auto take = [&](Value* v) {
    handoff.push_back(v);
    Value* input = w.addInput()->copyMetadata(v);
    w_env[v] = input;
    return input;
  };
  copyNodes(backward, in_w, w, w_env, take);
  for (Value* v : weight_roots) {
    const auto it = w_env.find(v);
    w.registerOutput(it != w_env.end() ? it->second : take(v));
  }
  return handoff;
}

// Fills `cut.input_graph` with I's part and `cut.handoff` with where W's inputs come from.
void copyInputPart(Graph& backward, const std::unordered_set<Node*>& in_i,
                   const std::vector<Value*>& input_roots, const std::vector<Value*>& handoff,
                   BackwardCut& cut) {
  std::unordered_map<Value*, Value*> i_env;
  std::unordered_map<Value*, size_t> backward_input;
  for (Value* v : backward.inputs()) {
    backward_input[v] = backward_input.size();
    i_env[v] = cut.input_graph->addInput()->copyMetadata(v);
  }
  copyNodes(backward, in_i, *cut.input_graph, i_env, [](Value* v) -> Value* {
    PPSTAGE_INTERNAL_ASSERT(false, "I reads '", v->debugName(), "', which it does not compute");
    return nullptr;
  });
  const auto in_input_graph = [&](Value* v) {
    const auto it = i_env.find(v);
    PPSTAGE_INTERNAL_ASSERT(it != i_env.end(), "I does not compute '", v->debugName(), "'");
    return it->second;
  };
  for (Value* v : input_roots) cut.input_graph->registerOutput(in_input_graph(v));
  size_t from_i = 0;
  for (Value* v : handoff) {
    const auto it = backward_input.find(v);
    if (it != backward_input.end()) {
      cut.handoff.push_back({true, it->second});
      continue;
    }
    cut.input_graph->registerOutput(in_input_graph(v));
    cut.handoff.push_back({false, from_i++});
  }
}

}  // namespace

BackwardCut cutBackward(Graph& original, const std::vector<bool>& weight) {
  PPSTAGE_INTERNAL_ASSERT(weight.size() == original.outputs().size(), "one flag per output");
  const std::shared_ptr<Graph> copy = original.copy();
  Graph& backward = *copy;
  BackwardCut cut;
  for (size_t k = 0; k < weight.size(); ++k) {
    (weight[k] ? cut.weight_outputs : cut.input_outputs).push_back(k);
  }
  std::vector<Value*> input_roots, weight_roots;
  const auto findRoots = [&] {
    input_roots.clear();
    weight_roots.clear();
    for (size_t k = 0; k < weight.size(); ++k) {
      (weight[k] ? weight_roots : input_roots).push_back(backward.outputs()[k]);
    }
  };
  findRoots();
  std::unordered_set<Value*> needed_by_i;
  neededNodes(
      backward, input_roots, [](Node*) { return false; }, &needed_by_i);
  splitMixedIfs(backward, needed_by_i);
  findRoots();  // the split replaced some
  const std::unordered_set<Node*> in_i =
      neededNodes(backward, input_roots, [](Node*) { return false; });
  const std::unordered_set<Node*> in_w = neededNodes(
      backward, weight_roots, [&](Node* n) { return in_i.count(n) > 0 && !isConstant(n); });

  // W: its reads from elsewhere become its inputs, in order of first use.
  cut.weight_graph = std::make_shared<Graph>();
  const std::vector<Value*> handoff =
      copyWeightPart(backward, in_w, weight_roots, *cut.weight_graph);
  // I: the backward's inputs, its nodes, its gradients, then what W takes that I computes.
  cut.input_graph = std::make_shared<Graph>();
  copyInputPart(backward, in_i, input_roots, handoff, cut);
  return cut;
}

}  // namespace ppstage::compile_detail
