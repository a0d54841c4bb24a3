// split::plan: which contiguous run of a model's graph each pipeline stage gets. A stage is
// a contiguous range of units (units.h), cut at split points or balanced.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/split/unit_times.h"
#include "ppstage/split/units.h"

namespace ppstage {

struct StageRange {
  size_t first_unit = 0;  // [first_unit, end_unit) into StagePlan::units
  size_t end_unit = 0;
};

struct StagePlan {
  std::vector<SplitUnit> units;
  std::vector<StageRange> stages;
  std::string method;  // "split_points", "params", "flops" or "time"

  // Balanced by time: each unit's measured forward + backward seconds, the stage-time
  // imbalance (the slowest stage's seconds over the mean) of the stages balanced by params
  // and of these, and the simulator's makespan for the configured schedule with each (I and
  // W half a B each; 0 where it could not be built).
  struct TimeBalance {
    std::vector<double> unit_seconds;
    double params_imbalance = 0;
    double imbalance = 0;
    double params_predicted_s = 0;
    double predicted_s = 0;
  };
  std::optional<TimeBalance> time_balance;

  size_t numStages() const { return stages.size(); }
  // The stage that runs top-level node `node_index`.
  size_t stageOfNode(size_t node_index) const;
};

// Plans `config.stages` stages: at `config.split_points` when given, otherwise balanced by
// `config.balance` (params | flops | time). Balancing by time takes `unit_seconds`, the
// measured cost of every unit of findUnits (measureUnitSeconds), and keeps the time plan
// unless the simulator predicts the params plan's step shorter. Throws ppstage::Error for a
// split point that names no module (listing the valid ones), two points starting one stage,
// or more stages than units. Split points may come in any order.
StagePlan planStages(const ModelGraph& model, const ValueShapes& shapes,
                     const PipelineConfig& config, const UnitSeconds* unit_seconds = nullptr);

// The contiguous partition of `costs` into `parts` non-empty ranges whose largest sum is
// smallest; returns the start index of every part after the first.
std::vector<size_t> balancedPartition(const std::vector<double>& costs, size_t parts);

}  // namespace ppstage
