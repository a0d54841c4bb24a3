// split::plan: which contiguous run of a model's graph each pipeline stage gets. A stage is
// a contiguous range of units (units.h), cut at split points or balanced.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"
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
  // and of these, and the predicted step with each (UnitTimes::predict_step; 0 where it
  // could not be predicted).
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

// Balance by time's input: what every unit of findUnits costs, and how long a step would
// take with a candidate cut. The splitter only plans with them; measuring and predicting
// are the runtime's (train/time_balance.h), which knows the run's micro-batch and schedule.
struct UnitTimes {
  std::vector<double> seconds;  // each unit's forward + backward, in unit order
  // The predicted step of the stages cut as given; 0 where it cannot be predicted. Empty:
  // nothing is predicted and the time plan is kept.
  std::function<double(const std::vector<StageRange>& stages)> predict_step;
};

// Plans `config.stages` stages: at `config.split_points` when given, otherwise balanced by
// `config.balance` (params | flops | time). Balancing by time takes `unit_times` (required
// then) and keeps the time plan unless the params plan's step is predicted shorter. Throws
// ppstage::Error for a split point that names no module (listing the valid ones), two
// points starting one stage, or more stages than units. Split points may come in any order.
StagePlan planStages(const ModelGraph& model, const ValueShapes& shapes,
                     const PipelineConfig& config, const UnitTimes* unit_times = nullptr);

// The contiguous partition of `costs` into `parts` non-empty ranges whose largest sum is
// smallest; returns the start index of every part after the first.
std::vector<size_t> balancedPartition(const std::vector<double>& costs, size_t parts);

}  // namespace ppstage
