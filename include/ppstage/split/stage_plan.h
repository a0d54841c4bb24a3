// split::plan: which contiguous run of a model's graph each pipeline stage gets.
//
// The splitter cuts only between *units*: module calls made by the model's forward (or by
// a wrapper it expands, see Note [Splittable units] in src/split/units.cpp), each with the
// glue code around it. A stage is a contiguous range of units. Units are found from the
// module calls recorded at capture, never from attribute names.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
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

struct StageRange {
  size_t first_unit = 0;  // [first_unit, end_unit) into StagePlan::units
  size_t end_unit = 0;
};

struct StagePlan {
  std::vector<SplitUnit> units;
  std::vector<StageRange> stages;
  std::string method;  // "split_points", "params" or "flops"

  size_t numStages() const { return stages.size(); }
  // The stage that runs top-level node `node_index`.
  size_t stageOfNode(size_t node_index) const;
};

// The nodes of the graph's top-level block, in order (what node indices refer to).
std::vector<torch::jit::Node*> topLevelNodes(const ModelGraph& model);

// The units of `model` (see Note [Splittable units]). `expanded` lists calls to split into
// their children in addition to those chosen automatically.
std::vector<SplitUnit> findUnits(const ModelGraph& model, const ValueShapes& shapes,
                                 const std::set<int>& expanded = {});

// Plans `config.stages` stages: at `config.split_points` when given, otherwise balanced by
// `config.balance` (params | flops). Throws ppstage::Error for a split point that names no
// module (listing the valid ones), two points starting one stage, or more stages than
// units. Split points may come in any order.
StagePlan planStages(const ModelGraph& model, const ValueShapes& shapes,
                     const PipelineConfig& config);

// The contiguous partition of `costs` into `parts` non-empty ranges whose largest sum is
// smallest; returns the start index of every part after the first.
std::vector<size_t> balancedPartition(const std::vector<double>& costs, size_t parts);

}  // namespace ppstage
