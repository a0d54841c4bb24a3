// Splittable units: where the splitter may cut a model's graph.
//
// Note [Splittable units]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Capture records, for every node, the module call it was inlined from, so the calls form a
// tree (the model's forward calls wte, layers.0, ...; layers.0 calls ln1, attn, ...). A unit
// is one call taken whole, with the glue code around it (additions of residuals, reshapes,
// size computations written in the caller). Which calls are units:
//   - the calls made by the model's forward itself, except that
//   - a call is *expanded* into the calls it makes when it is a wrapper: it holds more than
//     half of the model's parameters and makes at least two calls at the top level of the
//     graph (Hugging Face's GPT2LMHeadModel calls `transformer` and `lm_head`; the blocks are
//     inside `transformer`, so `transformer` is expanded);
//   - split points expand the callers of the module they name (layers.3.mlp makes layers.3
//     a caller to expand, and its four calls units).
// Glue code belongs to the unit before it when that unit is inside the same caller (a
// residual add after attn goes with attn), otherwise to the unit after it (the size
// computations at the top of forward go with the first unit). Constants go where they sit
// and are recomputed wherever else they are used.
// Only nodes of the graph's top-level block are assigned; a node with control flow goes
// whole to one unit, with every call inside it.
#include "ppstage/split/units.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>

#include "ppstage/split/flops.h"

namespace ppstage {

using torch::jit::Node;

std::vector<Node*> topLevelNodes(const ModelGraph& model) {
  std::vector<Node*> nodes;
  for (Node* node : model.graph->nodes()) nodes.push_back(node);
  return nodes;
}

namespace {

constexpr int kGlue = -1;

// The outermost call on `node`'s call chain that is not expanded, or kGlue.
int unitCallOf(const ModelGraph& model, const Node* node, const std::set<int>& expanded) {
  if (node->kind() == c10::prim::Constant) return kGlue;
  int unit = kGlue;
  for (int c = model.callOf(node); c != ModelGraph::kRootCall && c >= 0;
       c = model.calls[c].parent) {
    if (!expanded.count(c)) unit = c;
  }
  return unit;
}

// The parameters (indices into ModelGraph::parameters) `node` and its blocks read.
void collectParameters(const ModelGraph& model, const Node* node, std::set<int>& parameters) {
  for (const torch::jit::Value* input : node->inputs()) {
    if (input->node() == model.graph->param_node() && input->offset() >= model.numInputs()) {
      parameters.insert(static_cast<int>(input->offset() - model.numInputs()));
    }
  }
  for (const torch::jit::Block* block : node->blocks()) {
    for (const Node* inner : block->nodes()) collectParameters(model, inner, parameters);
  }
}

int64_t numelOf(const ModelGraph& model, const std::set<int>& parameters) {
  int64_t total = 0;
  for (int p : parameters) {
    if (model.parameters[p].is_parameter) total += model.parameters[p].value.numel();
  }
  return total;
}

// Unit index of every top-level node, following the glue rule of Note [Splittable units].
std::vector<SplitUnit> buildUnits(const ModelGraph& model, const std::vector<Node*>& nodes,
                                  const std::set<int>& expanded, std::vector<int>& unit_of_node) {
  std::vector<SplitUnit> units;
  std::set<int> seen_calls;
  unit_of_node.assign(nodes.size(), kGlue);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int call = unitCallOf(model, nodes[i], expanded);
    if (call == kGlue) continue;
    if (units.empty() || units.back().call != call) {
      if (seen_calls.count(call)) continue;  // out of order: glue it
      seen_calls.insert(call);
      units.push_back(SplitUnit{model.calls[call].path, call});
    }
    unit_of_node[i] = static_cast<int>(units.size()) - 1;
  }
  if (units.empty()) {  // a model that calls no module: one unit of glue
    units.push_back(SplitUnit{"", ModelGraph::kRootCall});
  }
  // Glue: to the previous unit inside the same caller, else to the next one.
  int previous = kGlue;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (unit_of_node[i] != kGlue) {
      previous = unit_of_node[i];
      continue;
    }
    int next = kGlue;
    for (size_t j = i + 1; j < nodes.size() && next == kGlue; ++j) next = unit_of_node[j];
    const int caller = model.callOf(nodes[i]);
    const bool previous_fits = previous != kGlue && model.isWithin(units[previous].call, caller);
    unit_of_node[i] = previous_fits || next == kGlue ? std::max(previous, 0) : next;
  }
  // Units must be contiguous: never go back to an earlier unit.
  for (size_t i = 1; i < nodes.size(); ++i) {
    unit_of_node[i] = std::max(unit_of_node[i], unit_of_node[i - 1]);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    SplitUnit& unit = units[unit_of_node[i]];
    if (unit.end_node == 0) unit.first_node = i;
    unit.end_node = i + 1;
  }
  return units;
}

void measureUnits(const ModelGraph& model, const std::vector<Node*>& nodes,
                  const ValueShapes& shapes, std::vector<SplitUnit>& units) {
  for (SplitUnit& unit : units) {
    std::set<int> parameters;
    unit.flops = 0;
    for (size_t i = unit.first_node; i < unit.end_node; ++i) {
      collectParameters(model, nodes[i], parameters);
      unit.flops += estimateFlops(nodes[i], shapes);
    }
    unit.num_params = numelOf(model, parameters);
  }
}

}  // namespace

std::vector<SplitUnit> findUnits(const ModelGraph& model, const ValueShapes& shapes,
                                 const std::set<int>& extra_expanded) {
  const std::vector<Node*> nodes = topLevelNodes(model);
  std::set<int> expanded = extra_expanded;
  expanded.insert(ModelGraph::kRootCall);
  std::vector<int> unit_of_node;
  std::vector<SplitUnit> units = buildUnits(model, nodes, expanded, unit_of_node);
  measureUnits(model, nodes, shapes, units);

  // Expand wrappers (see Note [Splittable units]) until none is left.
  const int64_t total = model.numTrainableParams();
  std::set<int> tried;
  for (bool changed = true; changed;) {
    changed = false;
    for (const SplitUnit& unit : units) {
      if (2 * unit.num_params <= total || !tried.insert(unit.call).second) continue;
      std::set<int> candidate = expanded;
      candidate.insert(unit.call);
      std::vector<SplitUnit> finer = buildUnits(model, nodes, candidate, unit_of_node);
      const auto inside = std::count_if(finer.begin(), finer.end(), [&](const SplitUnit& u) {
        return model.isWithin(u.call, unit.call);
      });
      if (inside < 2) continue;
      expanded = std::move(candidate);
      units = std::move(finer);
      measureUnits(model, nodes, shapes, units);
      changed = true;
      break;
    }
  }
  return units;
}

}  // namespace ppstage
