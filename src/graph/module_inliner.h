// Inlines every method and function call of a graph while recording, for each inlined node,
// the module call it came from. Private to src/graph (used by capture.cpp).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include "ppstage/graph/model_graph.h"

namespace ppstage::graph_detail {

// The dotted path of a module value reached from `self` through prim::GetAttr nodes
// ("layers.3"), or "" for `self` itself. Throws ppstage::Error when the module does not
// come from such a chain.
std::string modulePathOf(torch::jit::Value* module_value, torch::jit::Value* self);

// Inlines all calls in `graph` (whose first input is the model's `self`), filling
// `calls` (calls[0] must be the root) and `node_call`.
//
// Why not torch::jit::Inline and the nodes' inlined call stacks: a call stack names each
// module by its last attribute only ("3", never "layers.3"), so two ModuleLists would be
// indistinguishable. Inlining one call at a time and reading the module's full GetAttr chain
// from `self` gives the full path.
void inlineCallsWithPaths(torch::jit::Graph& graph, std::vector<ModuleCall>& calls,
                          std::unordered_map<const torch::jit::Node*, int>& node_call);

}  // namespace ppstage::graph_detail
