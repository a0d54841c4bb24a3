// See include/ppstage/split/plan_report.h.
#include "ppstage/split/plan_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "ppstage/core/affine_dim.h"
#include "ppstage/core/text.h"

namespace ppstage {
namespace {

// 1234567 -> "1.23 M"
std::string humanCount(double n) {
  const char* suffix[] = {"", " K", " M", " G", " T"};
  int i = 0;
  while (n >= 1000 && i < 4) {
    n /= 1000;
    ++i;
  }
  char text[32];
  std::snprintf(text, sizeof text, i == 0 ? "%.0f%s" : "%.3g%s", n, suffix[i]);
  return text;
}

// Splits "layers.12" into ("layers.", 12); number is -1 when the path ends in no index.
std::pair<std::string, long> indexed(const std::string& path) {
  const size_t dot = path.rfind('.');
  const std::string tail = dot == std::string::npos ? path : path.substr(dot + 1);
  if (tail.empty() || !std::all_of(tail.begin(), tail.end(), ::isdigit) || tail.size() > 9) {
    return {path, -1};
  }
  return {path.substr(0, path.size() - tail.size()), std::stol(tail)};
}

// "wte, wpe, layers.0, layers.1, layers.2" -> "wte, wpe, layers.0..2", wrapped into lines
// of about `width` characters.
std::vector<std::string> compactModules(const std::vector<std::string>& modules,
                                        size_t width = 40) {
  std::vector<std::string> items;
  for (size_t i = 0; i < modules.size();) {
    const auto [prefix, first] = indexed(modules[i]);
    size_t j = i + 1;
    while (first >= 0 && j < modules.size() &&
           indexed(modules[j]) == std::make_pair(prefix, first + static_cast<long>(j - i))) {
      ++j;
    }
    items.push_back(modules[i]);
    if (j - i > 1) items.back() += ".." + std::to_string(first + static_cast<long>(j - i - 1));
    i = j;
  }
  std::vector<std::string> lines{""};
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item = items[i] + (i + 1 < items.size() ? "," : "");
    if (!lines.back().empty() && lines.back().size() + 1 + item.size() > width)
      lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + item;
  }
  return lines;
}

std::string tensorText(const BoundaryTensor& t) {
  return t.name + " " + shapeText(t.meta.sizes) + " " + dtypeName(t.meta.dtype) +
         (t.meta.requires_grad ? " (grad)" : "") + (t.metadata ? " (sizes)" : "");
}

using Cell = std::vector<std::string>;  // one line per entry

void printTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<Cell>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      for (const std::string& line : row[c]) width[c] = std::max(width[c], line.size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      text += cells[c];
      if (c + 1 < cells.size()) text += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out << text << '\n';
  };
  line(header);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  line(rule);
  for (const auto& row : rows) {
    size_t height = 1;
    for (const Cell& cell : row) height = std::max(height, cell.size());
    for (size_t k = 0; k < height; ++k) {
      std::vector<std::string> cells;
      for (const Cell& cell : row) cells.push_back(k < cell.size() ? cell[k] : "");
      line(cells);
    }
  }
}

// A boundary tensor's dims as the boundary description writes them ("b", "16", "bL"), or
// null for a shape that is not affine in the batch.
nlohmann::json dimsJson(const TensorMeta& meta) {
  if (meta.dims.size() != meta.sizes.size()) return nullptr;
  nlohmann::json dims = nlohmann::json::array();
  for (const AffineDim& d : meta.dims) dims.push_back(affineDimText(d));
  return dims;
}

nlohmann::json tensorJson(const BoundaryTensor& t) {
  return {{"name", t.name},
          {"shape", t.meta.sizes},
          {"dtype", dtypeName(t.meta.dtype)},
          {"requires_grad", t.meta.requires_grad},
          {"metadata", t.metadata},
          {"dims", dimsJson(t.meta)},
          {"producer_stage", t.producer_stage}};
}

nlohmann::json stageJson(const StageModule& stage, const ModelGraph& model) {
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
  for (const BoundaryTensor& t : stage.inputs) inputs.push_back(tensorJson(t));
  for (const BoundaryTensor& t : stage.outputs) outputs.push_back(tensorJson(t));
  nlohmann::json parameters = nlohmann::json::array();
  for (const StageParameter& p : stage.parameters) {
    if (p.random_key) continue;  // not model state
    parameters.push_back(
        {{"name", p.name},
         {"aliases", p.aliases},
         {"shape", model.parameters.at(p.model_parameters.at(0)).value.sizes().vec()},
         {"trainable", p.is_parameter}});
  }
  return {
      {"index", stage.index},    {"modules", stage.modules}, {"num_params", stage.numParams(model)},
      {"flops", stage.flops},    {"inputs", inputs},         {"outputs", outputs},
      {"parameters", parameters}};
}

// The largest stage's cost over the mean: parameters where the cut was by params, FLOPs
// otherwise (1 for one stage, or where nothing is counted).
struct Imbalance {
  double ratio = 1;
  size_t largest = 0;
  bool by_params = false;
};

Imbalance imbalanceOf(const ModelSplit& split) {
  Imbalance out;
  out.by_params = split.partition.method == "params";
  std::vector<double> costs;
  for (const StageModule& stage : split.stages) {
    costs.push_back(out.by_params ? static_cast<double>(stage.numParams(split.graph))
                                  : stage.flops);
  }
  double total = 0;
  for (double cost : costs) total += cost;
  if (costs.size() < 2 || total <= 0) return out;
  out.largest = static_cast<size_t>(std::max_element(costs.begin(), costs.end()) - costs.begin());
  out.ratio = costs[out.largest] * static_cast<double>(costs.size()) / total;
  return out;
}

// The imbalance left, for the plan's heading: ", imbalance 1.04 (the largest stage's FLOPs
// over the mean)", and where that stage is one unit, which no cut makes smaller, its name.
// Empty for one stage.
std::string imbalanceText(const ModelSplit& split) {
  if (split.stages.size() < 2) return "";
  const Imbalance imbalance = imbalanceOf(split);
  char text[160];
  std::snprintf(text, sizeof text, ", imbalance %.2f (the largest stage's %s over the mean",
                imbalance.ratio, imbalance.by_params ? "parameters" : "FLOPs");
  std::string out = text;
  const StageModule& stage = split.stages[imbalance.largest];
  if (stage.modules.size() == 1 && imbalance.ratio > 1.005) {
    out += "; stage " + std::to_string(imbalance.largest) + " is the single unit " +
           stage.modules.front() + ", which no cut makes smaller";
  }
  return out + ")";
}

}  // namespace

void printPlanTable(std::ostream& out, const ModelSplit& split) {
  std::vector<std::string> inputs;
  for (size_t i = 0; i < split.example_inputs.size(); ++i) {
    const at::Tensor& input = split.example_inputs[i];
    inputs.push_back(split.graph.input_names.at(i) + " " + shapeText(input.sizes().vec()) + " " +
                     dtypeName(input.scalar_type()));
  }
  out << "model " << split.model.name << ": "
      << humanCount(static_cast<double>(split.graph.numTrainableParams()))
      << " parameters, example input" << (inputs.size() > 1 ? "s " : " ") << joinText(inputs, ", ")
      << "\n"
      << split.stages.size() << " stages over " << split.partition.units.size() << " units, "
      << (split.partition.method == "split_points" ? "cut at the split points"
                                                   : "balanced by " + split.partition.method)
      << (split.partition.why.empty() ? "" : " (" + split.partition.why + ")")
      << imbalanceText(split) << "\n";
  out << "\n";
  std::vector<std::vector<Cell>> rows;
  for (const StageModule& stage : split.stages) {
    Cell inputs, outputs;
    for (const BoundaryTensor& t : stage.inputs) inputs.push_back(tensorText(t));
    for (const BoundaryTensor& t : stage.outputs) outputs.push_back(tensorText(t));
    rows.push_back({{std::to_string(stage.index)},
                    compactModules(stage.modules),
                    {humanCount(static_cast<double>(stage.numParams(split.graph)))},
                    {humanCount(stage.flops)},
                    inputs,
                    outputs});
  }
  printTable(out, {"stage", "modules", "params", "FLOPs", "inputs", "outputs"}, rows);
  const SplitTimings& t = split.timings;
  char timing[200];
  std::snprintf(timing, sizeof timing,
                "\nsplit in %.2f s: load %.2f, capture %.2f, example run %.2f, plan %.2f, "
                "extract %.2f\n",
                t.load_s + t.capture_s + t.shapes_s + t.plan_s + t.extract_s, t.load_s, t.capture_s,
                t.shapes_s, t.plan_s, t.extract_s);
  out << timing;
  if (split.ties.empty()) return;
  out << "\ntied parameters (one tensor, a copy per stage, kept equal by the runtime):\n";
  for (const TiedParameter& tie : split.ties) {
    out << " ";
    for (size_t i = 0; i < tie.copies.size(); ++i) {
      out << (i ? " =" : "") << " " << tie.copies[i].name << " (stage " << tie.copies[i].stage
          << ")";
    }
    out << "\n";
  }
}

std::string planToJson(const ModelSplit& split) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageModule& stage : split.stages) stages.push_back(stageJson(stage, split.graph));
  nlohmann::json units = nlohmann::json::array();
  for (const SplitUnit& unit : split.partition.units) {
    units.push_back({{"path", unit.path}, {"num_params", unit.num_params}, {"flops", unit.flops}});
  }
  nlohmann::json ties = nlohmann::json::array();
  for (const TiedParameter& tie : split.ties) {
    nlohmann::json copies = nlohmann::json::array();
    for (const auto& copy : tie.copies) {
      copies.push_back({{"stage", copy.stage}, {"name", copy.name}});
    }
    ties.push_back({{"copies", copies}});
  }
  nlohmann::json inputs = nlohmann::json::array();
  for (size_t i = 0; i < split.example_inputs.size(); ++i) {
    inputs.push_back({{"name", split.graph.input_names.at(i)},
                      {"shape", split.example_inputs[i].sizes().vec()},
                      {"dtype", dtypeName(split.example_inputs[i].scalar_type())}});
  }
  nlohmann::json plan = {{"model", split.model.name},
                         {"method", split.partition.method},
                         {"imbalance", imbalanceOf(split).ratio},
                         {"input", inputs.at(0)},  // the first, as before several existed
                         {"inputs", inputs},
                         {"num_params", split.graph.numTrainableParams()},
                         {"units", units},
                         {"stages", stages},
                         {"tied_parameters", ties},
                         {"timings_s",
                          {{"load", split.timings.load_s},
                           {"capture", split.timings.capture_s},
                           {"example_run", split.timings.shapes_s},
                           {"plan", split.timings.plan_s},
                           {"extract", split.timings.extract_s}}}};
  return plan.dump(2);
}

}  // namespace ppstage
