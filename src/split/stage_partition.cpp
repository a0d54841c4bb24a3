// split::partition: split points or automatic balance -> StagePartition (see stage_partition.h).
#include "ppstage/split/stage_partition.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "ppstage/core/error.h"

namespace ppstage {

using torch::jit::Node;

size_t StagePartition::stageOfNode(size_t node_index) const {
  for (size_t s = 0; s < stages.size(); ++s) {
    if (node_index < units[stages[s].end_unit - 1].end_node) return s;
  }
  PPSTAGE_INTERNAL_FAIL("node ", node_index, " is past the last stage");
}

std::vector<size_t> balancedPartition(const std::vector<double>& costs, size_t parts) {
  const size_t n = costs.size();
  PPSTAGE_INTERNAL_ASSERT(parts >= 1 && parts <= n, parts, " parts of ", n, " items");
  std::vector<double> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][i]: smallest largest part when items [0, i) form k parts; cut[k][i]: where the
  // last of those parts starts.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<size_t>> cut(parts + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t k = 1; k <= parts; ++k) {
    for (size_t i = k; i <= n; ++i) {
      for (size_t j = k - 1; j < i; ++j) {
        const double worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (worst < best[k][i]) {
          best[k][i] = worst;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<size_t> starts(parts - 1);
  size_t end = n;
  for (size_t k = parts; k >= 2; --k) {
    end = cut[k][end];
    starts[k - 2] = end;
  }
  return starts;
}

namespace {

bool namesModule(const std::string& path, const std::string& point) {
  return path == point || path.rfind(point + ".", 0) == 0;
}

std::string listPaths(const std::vector<SplitUnit>& units) {
  constexpr size_t kMaxListed = 64;
  std::ostringstream out;
  for (size_t i = 0; i < units.size() && i < kMaxListed; ++i) {
    out << (i ? ", " : "") << units[i].path;
  }
  if (units.size() > kMaxListed) out << ", ... (" << units.size() << " in all)";
  return out.str();
}

// First top-level node of every call (or of a call inside it); SIZE_MAX when it runs only
// inside control flow.
std::vector<size_t> firstNodeOfCalls(const ModelGraph& model, const std::vector<Node*>& nodes) {
  std::vector<size_t> first(model.calls.size(), std::numeric_limits<size_t>::max());
  for (size_t i = nodes.size(); i-- > 0;) {
    for (int c = model.callOf(nodes[i]); c >= 0; c = model.calls[c].parent) first[c] = i;
  }
  return first;
}

// The call a split point names: the first one, in graph order, whose path is the point or
// lies under it ("layers" names layers.0).
int resolveSplitPoint(const ModelGraph& model, const std::vector<size_t>& first_node,
                      const std::string& point, const std::vector<SplitUnit>& units) {
  int found = -1;
  for (size_t c = 1; c < model.calls.size(); ++c) {
    if (!namesModule(model.calls[c].path, point)) continue;
    if (first_node[c] == std::numeric_limits<size_t>::max()) continue;
    if (found < 0 || first_node[c] < first_node[found]) found = static_cast<int>(c);
  }
  PPSTAGE_CHECK(found >= 0, "split point '", point, "' is not a module the model's forward ",
                "calls outside loops and branches; valid split points are these module paths, ",
                "any module inside them or a prefix of them: ", listPaths(units));
  return found;
}

size_t unitOfNode(const std::vector<SplitUnit>& units, size_t node) {
  for (size_t u = 0; u < units.size(); ++u) {
    if (node < units[u].end_node) return u;
  }
  return units.size() - 1;
}

StagePartition partitionAtSplitPoints(const ModelGraph& model, const ValueShapes& shapes,
                                      const PipelineConfig& config) {
  const std::vector<Node*> nodes = topLevelNodes(model);
  const std::vector<size_t> first_node = firstNodeOfCalls(model, nodes);
  const std::vector<SplitUnit> default_units = findUnits(model, shapes);
  std::vector<int> targets;
  std::set<int> expanded;
  for (const std::string& point : config.split_points) {
    const int call = resolveSplitPoint(model, first_node, point, default_units);
    targets.push_back(call);
    for (int c = model.calls[call].parent; c >= 0; c = model.calls[c].parent) expanded.insert(c);
  }
  StagePartition plan;
  plan.method = "split_points";
  plan.units = findUnits(model, shapes, expanded);
  std::vector<std::pair<size_t, std::string>> starts;
  for (size_t i = 0; i < targets.size(); ++i) {
    const size_t unit = unitOfNode(plan.units, first_node[targets[i]]);
    PPSTAGE_CHECK(unit > 0, "split point '", config.split_points[i], "' is where the model ",
                  "starts; stage 0 would be empty");
    starts.emplace_back(unit, config.split_points[i]);
  }
  // In the order given: a list the forward does not run in that order is a mistake.
  for (size_t i = 1; i < starts.size(); ++i) {
    PPSTAGE_CHECK(starts[i].first != starts[i - 1].first, "split points '", starts[i - 1].second,
                  "' and '", starts[i].second, "' start the same stage (at ",
                  plan.units[starts[i].first].path, ")");
    PPSTAGE_CHECK(starts[i].first > starts[i - 1].first, "split points must be listed in the ",
                  "order the model runs them: '", starts[i].second, "' runs before '",
                  starts[i - 1].second, "'");
  }
  size_t begin = 0;
  for (const auto& [unit, point] : starts) {
    plan.stages.push_back(StageRange{begin, unit});
    begin = unit;
  }
  plan.stages.push_back(StageRange{begin, plan.units.size()});
  return plan;
}

std::vector<StageRange> partitioned(const std::vector<double>& costs, size_t stages) {
  std::vector<StageRange> ranges;
  size_t begin = 0;
  for (size_t start : balancedPartition(costs, stages)) {
    ranges.push_back(StageRange{begin, start});
    begin = start;
  }
  ranges.push_back(StageRange{begin, costs.size()});
  return ranges;
}

StagePartition partitionBalanced(const ModelGraph& model, const ValueShapes& shapes,
                                 const PipelineConfig& config) {
  const size_t stages = static_cast<size_t>(std::max<int64_t>(config.stages, 1));
  PPSTAGE_INTERNAL_ASSERT(config.balance != Balance::kTime || stages == 1,
                          "balance by time is cut by the planner before the split (split points)");
  StagePartition plan;
  plan.units = findUnits(model, shapes);
  PPSTAGE_CHECK(stages <= plan.units.size(), "--pipeline.stages is ", stages,
                " but the model has only ", plan.units.size(), " splittable units (",
                listPaths(plan.units), ")");
  double counted_flops = 0;
  for (const SplitUnit& unit : plan.units) counted_flops += unit.flops;
  // No FLOPs counted (no op the counter knows): parameters are what is left to balance.
  const bool by_flops = config.balance == Balance::kFlops && counted_flops > 0;
  plan.method = by_flops || config.balance != Balance::kFlops ? toString(config.balance) : "params";
  if (config.balance == Balance::kFlops && !by_flops) plan.why = "no unit's FLOPs are counted";
  std::vector<double> costs;
  for (const SplitUnit& unit : plan.units) {
    costs.push_back(by_flops ? unit.flops : static_cast<double>(unit.num_params));
  }
  plan.stages = partitioned(costs, stages);
  return plan;
}

}  // namespace

StagePartition partitionStages(const ModelGraph& model, const ValueShapes& shapes,
                               const PipelineConfig& config) {
  if (!config.split_points.empty()) return partitionAtSplitPoints(model, shapes, config);
  return partitionBalanced(model, shapes, config);
}

}  // namespace ppstage
