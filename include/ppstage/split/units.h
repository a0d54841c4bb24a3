// split::units: where the splitter may cut.
//
// The splitter cuts only between *units*: module calls made by the model's forward (or by
// a wrapper it expands, see Note [Splittable units] in src/split/units.cpp), each with the
// glue code around it. Units are found from the module calls recorded at capture, never
// from attribute names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"

namespace torch::jit {
struct Node;
}

namespace ppstage {

struct SplitUnit {
  std::string path;       // module path of the call, e.g. "layers.3"
  int call = 0;           // index into ModelGraph::calls
  size_t first_node = 0;  // [first_node, end_node): indices into topLevelNodes()
  size_t end_node = 0;
  int64_t num_params = 0;  // elements of the parameters its nodes use (tied ones in each)
  double flops = 0;        // estimated forward FLOPs for the example input
};

// The nodes of the graph's top-level block, in order (what node indices refer to).
std::vector<torch::jit::Node*> topLevelNodes(const ModelGraph& model);

// The units of `model` (see Note [Splittable units]). `expanded` lists calls to split into
// their children in addition to those chosen automatically.
std::vector<SplitUnit> findUnits(const ModelGraph& model, const ValueShapes& shapes,
                                 const std::set<int>& expanded = {});

}  // namespace ppstage
