// split::partition: which contiguous run of a model's graph each pipeline stage gets. A stage is
// a contiguous range of units (units.h), cut at split points or balanced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/split/units.h"

namespace ppstage {

struct StageRange {
  size_t first_unit = 0;  // [first_unit, end_unit) into StagePartition::units
  size_t end_unit = 0;
};

struct StagePartition {
  std::vector<SplitUnit> units;
  std::vector<StageRange> stages;
  std::string method;  // "split_points", "params", "flops" or "time" (split points cut by time)
  std::string why;     // why the method is not the one asked for ("no unit's FLOPs are counted")

  size_t numStages() const { return stages.size(); }
  // The stage that runs top-level node `node_index`.
  size_t stageOfNode(size_t node_index) const;
};

// Plans `config.stages` stages: at `config.split_points` when given, otherwise balanced by
// `config.balance` (params | flops; time is the planner's, which runs before the split and
// writes split points: train/auto_plan.h). Throws ppstage::Error for a split point that
// names no module (listing the valid ones), two points starting one stage, or more stages
// than units. Split points may come in any order.
StagePartition partitionStages(const ModelGraph& model, const ValueShapes& shapes,
                               const PipelineConfig& config);

// The contiguous partition of `costs` into `parts` non-empty ranges whose largest sum is
// smallest; returns the start index of every part after the first.
std::vector<size_t> balancedPartition(const std::vector<double>& costs, size_t parts);

}  // namespace ppstage
