// See include/ppstage/observe/metrics.h.
#include "ppstage/observe/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "ppstage/core/error.h"
#include "ppstage/core/json_integer.h"
#include "ppstage/core/statistics.h"
#include "ppstage/core/units.h"

namespace ppstage {

namespace {

// {"F": f, "B": b, "I": i, "W": w}: seconds per action of each compute kind, or
// {"SEND_F": ..., "RECV_F": ..., "SEND_B": ..., "RECV_B": ...}: seconds waited per kind.
template <typename Space>
nlohmann::json perKindJson(const PerKind<double, Space>& values) {
  nlohmann::json json = nlohmann::json::object();
  for (const ActionKind kind : PerKind<double, Space>::kinds()) json[kindName(kind)] = values[kind];
  return json;
}

nlohmann::json rankJson(const RankMetrics& r) {
  nlohmann::json json({{"rank", r.rank},
                       {"host", r.host},
                       {"stages", r.stages},
                       {"busy_s", r.busy_s},
                       {"idle_s", r.idle_s},
                       {"peak_allocated_mb", r.peak_allocated_mb},
                       {"peak_activation_mb", r.peak_activation_mb}});
  RankMetrics::forEachOwnFigure(r, [&](const char* name, const auto& value) {
    using Value = std::decay_t<decltype(value)>;
    if constexpr (std::is_arithmetic_v<Value>) {
      json[name] = value;
    } else {
      json[name] = perKindJson(value);
    }
  });
  return json;
}

// Each element of `items` as `toJson` makes it, in a JSON array.
template <typename Item, typename ToJson>
nlohmann::json arrayJson(const std::vector<Item>& items, ToJson toJson) {
  nlohmann::json array = nlohmann::json::array();
  for (const Item& item : items) array.push_back(toJson(item));
  return array;
}

nlohmann::json compileJson(const CompileMetrics& c) {
  return {{"mode", c.mode},
          {"graphs_compiled", c.graphs_compiled},
          {"cache_hits", c.cache_hits},
          {"respecializations", c.respecializations},
          {"specializations_per_graph", c.specializations_per_graph},
          {"fusion_groups", c.fusion_groups},
          {"differentiable_graphs", c.differentiable_graphs},
          {"compile_time_s", c.compile_time_s}};
}

}  // namespace

std::string metricsToJson(const RunMetrics& m) {
  const nlohmann::json ranks = arrayJson(m.ranks, rankJson);
  const nlohmann::json stage_costs =
      arrayJson(m.stage_action_s, [](const PerCompute<double>& c) { return perKindJson(c); });
  const nlohmann::json eval = arrayJson(m.eval, [](const EvalRecord& e) -> nlohmann::json {
    return {{"step", e.step}, {"loss", e.loss}, {"accuracy", e.accuracy}, {"seconds", e.seconds}};
  });
  const nlohmann::json checkpoints =
      arrayJson(m.checkpoints, [](const CheckpointRecord& c) -> nlohmann::json {
        return {{"path", c.path}, {"seconds", c.seconds}};
      });
  nlohmann::json json = {
      {"model", m.model},
      {"schedule", m.schedule},
      {"data", m.data},
      {"stages", m.stages},
      {"pp", m.pp},
      {"dp", m.dp},
      {"tp", m.tp},
      {"microbatches", m.microbatches},
      {"batch_size", m.batch_size},
      {"tokens_per_step", m.tokens_per_step},
      {"padded_tokens_per_step", m.padded_tokens_per_step},
      {"precision", m.precision},
      {"message_bytes", m.message_bytes},
      {"params_dir", m.params_dir},
      {"resumed_from", m.resumed_from.empty() ? nlohmann::json() : nlohmann::json(m.resumed_from)},
      {"resume_s", m.resume_s},
      {"first_step", m.first_step},
      {"checkpoints", checkpoints},
      {"skipped_steps", m.skipped_steps},
      {"stopped_by", m.stopped_by.empty() ? nlohmann::json() : nlohmann::json(m.stopped_by)},
      {"losses", m.losses},
      {"accuracies", m.accuracies},
      {"learning_rates", m.learning_rates},
      {"eval", eval},
      {"final_loss", m.final_loss},
      {"step_time_s", m.step_time_s},
      {"bubble_fraction", m.bubble_fraction},
      {"step_tokens", m.step_tokens},
      {"tokens_per_s", m.tokens_per_s},
      {"throughput_unit", m.throughput_unit},
      {"measured_step_s", m.measured_step_s},
      {"predicted_makespan_s", m.predicted_makespan_s},
      {"predicted_step_s", m.predicted_step_s},
      {"comm_s", m.comm_s},
      {"action_costs_s", perKindJson(m.action_s)},
      {"stage_action_costs_s", stage_costs},
      {"ranks", ranks},
      {"compile", compileJson(m.compile)},
      {"recompute", arrayJson(m.recompute,
                              [](const StageRecompute& r) -> nlohmann::json {
                                return {{"stage", r.stage},
                                        {"policy", r.policy},
                                        {"blocks", r.blocks},
                                        {"kept_mb_per_microbatch", r.kept_mb_per_microbatch}};
                              })},
  };
  return json.dump(2);
}

RunMetrics metricsFromJson(const std::string& text, const std::string& source) {
  RunMetrics m;
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    m.model = json.value("model", "");
    m.schedule = json.value("schedule", "");
    // Files written before the mode moved into `compile` have it at the top.
    m.compile.mode = json.contains("compile") ? json.at("compile").value("mode", "")
                                              : json.value("compile_mode", "");
    m.stages = jsonIntegerOr<int>(json, "stages", 1, source);
    m.pp = jsonIntegerOr<int>(json, "pp", 1, source);
    m.dp = jsonIntegerOr<int>(json, "dp", 1, source);
    m.tp = jsonIntegerOr<int>(json, "tp", 1, source);
    m.microbatches = jsonIntegerOr<int>(json, "microbatches", 1, source);
    m.precision = json.value("precision", "fp32");
    m.params_dir = json.value("params_dir", "");
    for (const nlohmann::json& loss : json.at("losses")) {
      m.losses.push_back(loss.is_null() ? std::nan("") : loss.get<double>());
    }
    const nlohmann::json& final_loss = json.at("final_loss");
    m.final_loss = final_loss.is_null() ? std::nan("") : final_loss.get<double>();
    m.first_step = jsonIntegerOr(json, "first_step", 0, source);
    m.skipped_steps = jsonIntegerOr(json, "skipped_steps", 0, source);
    if (json.contains("resumed_from") && json.at("resumed_from").is_string()) {
      m.resumed_from = json.at("resumed_from").get<std::string>();
    }
    m.step_time_s = json.value("step_time_s", std::vector<double>{});
    m.measured_step_s = json.value("measured_step_s", 0.0);
    m.predicted_makespan_s = json.value("predicted_makespan_s", 0.0);
    m.predicted_step_s = json.value("predicted_step_s", 0.0);
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::concat(source, " is not a ppstage metrics file: ", e.what()));
  }
  return m;
}

double peakRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // in kB
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

bool resetPeakRss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  return static_cast<bool>(clear_refs << "5" << std::flush);
}

double currentRssMb() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return mib(static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)));
}

int openFileDescriptors() {
  std::error_code error;
  int count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++count;
  }
  return error ? -1 : count - 1;  // less the iterator's own descriptor of the folder
}

size_t growthSteps(size_t steps) {
  const size_t warmup = std::max<size_t>(kWarmupSteps, steps / 10);
  return steps > warmup ? steps - warmup : 0;
}

double growthPer100Steps(const std::vector<double>& samples) {
  if (growthSteps(samples.size()) < kMinGrowthSteps) return 0;
  const size_t begin = samples.size() - growthSteps(samples.size());
  const double n = static_cast<double>(samples.size() - begin);
  double mean_x = 0, mean_y = 0;
  for (size_t i = begin; i < samples.size(); ++i) {
    mean_x += static_cast<double>(i) / n;
    mean_y += samples[i] / n;
  }
  double sxy = 0, sxx = 0;
  for (size_t i = begin; i < samples.size(); ++i) {
    const double dx = static_cast<double>(i) - mean_x;
    sxy += dx * (samples[i] - mean_y);
    sxx += dx * dx;
  }
  return sxx > 0 ? 100.0 * sxy / sxx : 0;
}

namespace {

size_t warmupSteps(const std::vector<double>& step_times) {
  return step_times.empty() ? 0 : std::min(kWarmupSteps, step_times.size() - 1);
}

}  // namespace

double steadyStepTime(const std::vector<double>& step_times) {
  return median(std::vector<double>(
      step_times.begin() + static_cast<std::ptrdiff_t>(warmupSteps(step_times)), step_times.end()));
}

double warmupOverhead(const std::vector<double>& step_times) {
  const double steady = steadyStepTime(step_times);
  double overhead = 0;
  for (size_t i = 0; i < warmupSteps(step_times); ++i) overhead += step_times[i] - steady;
  return std::max(0.0, overhead);
}

}  // namespace ppstage
