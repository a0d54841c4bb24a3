// Block compilation's cut: a stage graph split again into segments at block boundaries.
//
// Blocks are instances of a module type that repeats (found from the module calls recorded
// at capture, never from attribute names), or the calls whose path matches
// --compile.block_pattern. Each block instance's nodes form one segment; the code between
// blocks (embedding, head, what the splitter added) forms segments of its own. A segment is
// a graph of its own: the values it reads from earlier segments (or the stage's inputs,
// parameters included) are its inputs, in order of first use, and the values later
// segments or the stage's outputs read are its outputs; constants are copied in. Values are
// unnamed, so structurally identical blocks print identical graphs: `structure` is the key
// the compile cache shares executors by.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ppstage/graph/model_graph.h"

namespace torch::jit {
struct Graph;
struct Node;
struct Value;
}  // namespace torch::jit

namespace ppstage {

// For each of model.calls: whether it is a block. With an empty `pattern`: greedily, the
// module type whose instances (at least two, not inside an already chosen block) cover the
// most nodes, then the next, while a type covers at least 10% of the model's nodes. With a
// pattern (ECMAScript regex over whole module paths): the outermost matching calls.
// Throws ppstage::Error for a bad pattern.
std::vector<bool> findBlocks(const ModelGraph& model, const std::string& pattern);

struct GraphSegment {
  std::shared_ptr<torch::jit::Graph> graph;
  std::vector<torch::jit::Value*> inputs;   // values of the stage graph, in graph input order
  std::vector<torch::jit::Value*> outputs;  // values of the stage graph, in graph output order
  std::string block;      // module path of the block instance; empty between blocks
  std::string structure;  // the graph's text: equal for structurally identical segments
};

// The segments of a stage's `graph` in execution order. `node_call` maps its top-level
// nodes to the call (index into model.calls) each was cut from (StageModule::node_call);
// `blocks` comes from findBlocks over `model`, the ModelGraph the stage was cut from.
std::vector<GraphSegment> segmentStage(
    torch::jit::Graph& graph, const std::unordered_map<const torch::jit::Node*, int>& node_call,
    const ModelGraph& model, const std::vector<bool>& blocks);

// A segment's graph for recomputation's rerun: every input that several top-level nodes
// read becomes one input per reader, so that the gradients each reader gives it leave the
// rerun apart and add up where the first forward's did, in the same order (Note
// [Recomputed gradients add up as before] in src/compile/recompute.cpp). An input's
// readers come last to first, as a backward reaches them.
struct RerunGraph {
  std::shared_ptr<torch::jit::Graph> graph;
  std::vector<size_t> source;  // per input of `graph`: the segment graph's input it reads
  std::string structure;       // the graph's text, as GraphSegment::structure
};
RerunGraph inputPerReader(torch::jit::Graph& segment);

// `graph` cut into runs of consecutive top-level nodes (constants aside, copied where read)
// to which `label` gives one label, each run a segment whose `block` is that label (a
// recomputed block's segment cut again at the ops selective recomputation keeps).
std::vector<GraphSegment> cutIntoRuns(torch::jit::Graph& graph,
                                      const std::function<std::string(torch::jit::Node*)>& label);

}  // namespace ppstage
