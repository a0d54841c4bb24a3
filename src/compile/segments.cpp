// See include/ppstage/compile/segments.h.
#include "ppstage/compile/segments.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <map>
#include <regex>
#include <unordered_map>
#include <unordered_set>

#include "ppstage/core/error.h"

namespace ppstage {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// Nodes of the model inside each call (its descendants' included).
std::vector<int64_t> nodesPerCall(const ModelGraph& model) {
  std::vector<int64_t> count(model.calls.size(), 0);
  for (const auto& [node, call] : model.node_call) {
    for (int c = call; c >= 0; c = model.calls[static_cast<size_t>(c)].parent) {
      ++count[static_cast<size_t>(c)];
    }
  }
  return count;
}

// The outermost block containing `call` (itself included), or -1.
int blockOf(const ModelGraph& model, const std::vector<bool>& blocks, int call) {
  int found = -1;
  for (int c = call; c >= 0; c = model.calls[static_cast<size_t>(c)].parent) {
    if (blocks[static_cast<size_t>(c)]) found = c;  // keep walking: the outermost wins
  }
  return found;
}

// Clears every value name in `block` (and nested blocks), so values print as numbers in
// creation order.
void clearNames(torch::jit::Block* block) {
  for (Value* v : block->inputs()) v->setDebugName("");
  for (Node* n : block->nodes()) {
    for (Value* v : n->outputs()) v->setDebugName("");
    for (torch::jit::Block* sub : n->blocks()) clearNames(sub);
  }
}

GraphSegment buildSegment(const std::vector<Node*>& run, const torch::jit::Block* top,
                          const std::string& block) {
  GraphSegment seg;
  seg.block = block;
  seg.graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Graph& g = *seg.graph;
  const std::unordered_set<const Node*> members(run.begin(), run.end());
  std::unordered_map<Value*, Value*> env;
  auto lookup = [&](Value* v) -> Value* {
    const auto it = env.find(v);
    if (it != env.end()) return it->second;
    Node* def = v->node();
    if (def->kind() == c10::prim::Constant && def->owningBlock() == top) {
      Node* constant = g.appendNode(g.createClone(def, [](Value* x) { return x; }));
      env[v] = constant->output();
      return constant->output();
    }
    Value* input = g.addInput()->setType(v->type());
    seg.inputs.push_back(v);
    env[v] = input;
    return input;
  };
  for (Node* n : run) {
    Node* clone = g.appendNode(g.createClone(n, lookup));
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->output(i)] = clone->output(i);
  }
  for (Node* n : run) {
    for (Value* v : n->outputs()) {
      bool used_later = false;
      for (const torch::jit::Use& use : v->uses()) {
        if (!members.count(topLevelNodeOf(use.user, top))) used_later = true;
      }
      if (used_later) {
        seg.outputs.push_back(v);
        g.registerOutput(env.at(v));
      }
    }
  }
  clearNames(g.block());
  seg.structure = g.toString(/*print_source_locations=*/false);
  return seg;
}

// The blocks --compile.block_pattern names: the outermost calls whose path it matches.
std::vector<bool> blocksMatching(const ModelGraph& model, const std::string& pattern) {
  const size_t n = model.calls.size();
  std::vector<bool> blocks(n, false);
  std::regex re;
  try {
    re = std::regex(pattern);
  } catch (const std::regex_error& e) {
    throw Error(detail::concat("--compile.block_pattern '", pattern, "' is not a regular ",
                               "expression: ", e.what()));
  }
  for (size_t c = 1; c < n; ++c) {
    if (std::regex_match(model.calls[c].path, re) &&
        blockOf(model, blocks, model.calls[c].parent) < 0) {  // not inside a chosen block
      blocks[c] = true;
    }
  }
  return blocks;
}

}  // namespace

std::vector<bool> findBlocks(const ModelGraph& model, const std::string& pattern) {
  if (!pattern.empty()) return blocksMatching(model, pattern);
  const size_t n = model.calls.size();
  std::vector<bool> blocks(n, false);
  const std::vector<int64_t> size = nodesPerCall(model);
  const int64_t total = std::max<int64_t>(1, size[ModelGraph::kRootCall]);
  while (true) {
    // Coverage of each type by its instances outside the chosen blocks.
    std::map<std::string, std::pair<int64_t, std::vector<size_t>>> by_type;
    for (size_t c = 1; c < n; ++c) {
      if (blockOf(model, blocks, static_cast<int>(c)) >= 0) continue;
      bool holds_block = false;
      for (size_t b = 1; b < n && !holds_block; ++b) {
        holds_block = blocks[b] && model.isWithin(static_cast<int>(b), static_cast<int>(c));
      }
      if (holds_block) continue;
      auto& entry = by_type[model.calls[c].type_name];
      entry.second.push_back(c);
    }
    std::string best;
    int64_t best_cover = 0;
    for (auto& [type, entry] : by_type) {
      // Outermost instances only: an instance inside another of the same type does not count.
      std::vector<size_t> outer;
      for (size_t c : entry.second) {
        bool inside_same = false;
        for (size_t o : entry.second) {
          if (o != c && model.isWithin(static_cast<int>(c), static_cast<int>(o)))
            inside_same = true;
        }
        if (!inside_same) outer.push_back(c);
      }
      entry.second = outer;
      int64_t cover = 0;
      for (size_t c : outer) cover += size[c];
      entry.first = cover;
      if (outer.size() >= 2 && cover > best_cover) {
        best_cover = cover;
        best = type;
      }
    }
    if (best.empty() || best_cover * 10 < total) break;
    for (size_t c : by_type[best].second) blocks[c] = true;
  }
  return blocks;
}

RerunGraph inputPerReader(torch::jit::Graph& segment) {
  RerunGraph out;
  out.graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Graph& g = *out.graph;
  const torch::jit::Block* top = segment.block();
  // Per segment input, the new input of each top-level reader.
  std::vector<std::unordered_map<const Node*, Value*>> per_reader(segment.inputs().size());
  for (size_t i = 0; i < segment.inputs().size(); ++i) {
    const Value* in = segment.inputs()[i];
    std::vector<Node*> readers;
    for (const torch::jit::Use& use : in->uses()) {
      Node* reader = topLevelNodeOf(use.user, top);
      if (std::find(readers.begin(), readers.end(), reader) == readers.end()) {
        readers.push_back(reader);
      }
    }
    const Node* ret = segment.return_node();
    std::sort(readers.begin(), readers.end(), [&](const Node* a, const Node* b) {  // last first
      if (a == ret || b == ret) return a == ret && b != ret;
      return b->isBefore(a);
    });
    if (readers.size() <= 1) {
      Value* v = g.addInput()->setType(in->type());
      out.source.push_back(i);
      for (Node* reader : readers) per_reader[i][reader] = v;
      if (readers.empty()) per_reader[i][nullptr] = v;
      continue;
    }
    for (Node* reader : readers) {
      per_reader[i][reader] = g.addInput()->setType(in->type());
      out.source.push_back(i);
    }
  }
  std::unordered_map<const Value*, Value*> env;
  for (Node* n : segment.nodes()) {
    for (size_t i = 0; i < segment.inputs().size(); ++i) {
      const auto it = per_reader[i].find(n);
      if (it != per_reader[i].end()) env[segment.inputs()[i]] = it->second;
    }
    Node* clone = g.appendNode(g.createClone(n, [&](Value* v) { return env.at(v); }));
    for (size_t k = 0; k < n->outputs().size(); ++k) env[n->output(k)] = clone->output(k);
  }
  for (const Value* v : segment.outputs()) {
    // An input passed straight out is read by the return, its new input of its own.
    g.registerOutput(v->node() == segment.param_node()
                         ? per_reader.at(v->offset()).at(segment.return_node())
                         : env.at(v));
  }
  clearNames(g.block());
  out.structure = g.toString(/*print_source_locations=*/false);
  return out;
}

std::vector<GraphSegment> cutIntoRuns(torch::jit::Graph& graph,
                                      const std::function<std::string(Node*)>& label) {
  const torch::jit::Block* top = graph.block();
  std::vector<GraphSegment> segments;
  std::vector<Node*> run;
  std::string run_label;
  auto flush = [&] {
    if (run.empty()) return;
    segments.push_back(buildSegment(run, top, run_label));
    run.clear();
  };
  for (Node* n : graph.nodes()) {
    if (n->kind() == c10::prim::Constant) continue;  // copied into the segments that read it
    std::string l = label(n);
    if (run.empty() || l != run_label) {
      flush();
      run_label = std::move(l);
    }
    run.push_back(n);
  }
  flush();
  return segments;
}

std::vector<GraphSegment> segmentStage(
    torch::jit::Graph& graph, const std::unordered_map<const torch::jit::Node*, int>& node_call,
    const ModelGraph& model, const std::vector<bool>& blocks) {
  return cutIntoRuns(graph, [&](Node* n) {
    const auto it = node_call.find(n);
    const int owner = it == node_call.end() ? -1 : blockOf(model, blocks, it->second);
    return owner >= 0 ? model.calls[static_cast<size_t>(owner)].path : std::string();
  });
}

}  // namespace ppstage
