// See include/ppstage/plan/cost_profile.h.
#include "ppstage/plan/cost_profile.h"

#include <algorithm>
#include <iterator>

#include <nlohmann/json.hpp>

#include "ppstage/core/error.h"
#include "ppstage/core/json_integer.h"

namespace ppstage {

double costAtSize(const std::vector<int64_t>& sizes, const std::vector<double>& values,
                  double size) {
  PPSTAGE_INTERNAL_ASSERT(!sizes.empty() && sizes.size() == values.size(), sizes.size(),
                          " sizes for ", values.size(), " values");
  if (sizes.size() == 1 || sizes[1] == sizes[0]) {
    return values[0] * size / static_cast<double>(sizes[0]);
  }
  const double b0 = static_cast<double>(sizes[0]), b1 = static_cast<double>(sizes[1]);
  const double slope = (values[1] - values[0]) / (b1 - b0);
  return std::max(0.0, values[0] + slope * (size - b0));
}

const RecomputedUnitCost* UnitCost::recomputed(RecomputePolicy policy) const {
  const RecomputedUnitCost* figures = policy == RecomputePolicy::kFull        ? &full
                                      : policy == RecomputePolicy::kSelective ? &selective
                                                                              : nullptr;
  return figures != nullptr && figures->measured() ? figures : nullptr;
}

std::vector<RecomputePolicy> CostProfile::recomputePolicies() const {
  std::vector<RecomputePolicy> out;
  for (const RecomputePolicy policy : {RecomputePolicy::kFull, RecomputePolicy::kSelective}) {
    const auto measured = [policy](const UnitCost& unit) {
      return unit.recomputed(policy) != nullptr;
    };
    if (std::any_of(units.begin(), units.end(), measured)) out.push_back(policy);
  }
  return out;
}

double CostProfile::secondsOf(size_t u, ActionKind kind, double size,
                              RecomputePolicy policy) const {
  const UnitCost& unit = units.at(u);
  const RecomputedUnitCost* recomputed = unit.recomputed(policy);
  std::vector<double> values;
  for (const PerCompute<double>& at : recomputed ? recomputed->seconds : unit.seconds) {
    values.push_back(at[kind]);
  }
  return costAtSize(microbatch_sizes, values, size);
}

double CostProfile::activationBytesOf(size_t u, double size, RecomputePolicy policy) const {
  const RecomputedUnitCost* recomputed = units.at(u).recomputed(policy);
  return costAtSize(microbatch_sizes,
                    recomputed ? recomputed->activation_bytes : units.at(u).activation_bytes, size);
}

double CostProfile::outputBytesOf(size_t u, double size) const {
  return costAtSize(microbatch_sizes, units.at(u).output_bytes, size);
}

double CostProfile::stateBytesPerElement(int dp, bool shard_optimizer) const {
  if (!shard_optimizer || dp <= 1) return state_bytes_per_element;
  constexpr double kGradient = 4.0, kMaster = 4.0;  // fp32
  return kGradient + (optimizer_state_bytes_per_element + kMaster) / dp;
}

double CostProfile::optimizerSeconds(double elements, int dp, bool shard_optimizer) const {
  return optimizer_s_per_element * elements / (shard_optimizer && dp > 1 ? dp : 1);
}

double CostProfile::messageSeconds(double bytes, bool across_hosts) const {
  if (across_hosts && hasHostLinks()) return host_link_latency_s + bytes / host_link_bytes_per_s;
  return link_latency_s + bytes / link_bytes_per_s;
}

double CostProfile::allReduceSeconds(double bytes, int ranks, bool across_hosts) const {
  if (ranks <= 1) return 0;
  const bool between = across_hosts && hasHostLinks();
  const double latency = between ? host_allreduce_latency_s : allreduce_latency_s;
  const double bandwidth = between ? host_allreduce_bytes_per_s : allreduce_bytes_per_s;
  return (ranks - 1) * latency + 2.0 * (ranks - 1) / ranks * bytes / bandwidth;
}

double CostProfile::backwardPeakBytesOf(size_t u, double size, RecomputePolicy policy) const {
  const RecomputedUnitCost* recomputed = units.at(u).recomputed(policy);
  return costAtSize(microbatch_sizes,
                    recomputed ? recomputed->backward_peak_bytes : units.at(u).backward_peak_bytes,
                    size);
}

double CostProfile::weightPendingBytesOf(size_t u, double size, RecomputePolicy policy) const {
  const RecomputedUnitCost* recomputed = units.at(u).recomputed(policy);
  return costAtSize(
      microbatch_sizes,
      recomputed ? recomputed->weight_pending_bytes : units.at(u).weight_pending_bytes, size);
}

namespace {

// Adds `more` / n to `sum` (set to it where `first`), entry by entry.
void addMean(std::vector<double>& sum, const std::vector<double>& more, bool first, double n) {
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = (first ? 0 : sum[i]) + more.at(i) / n;
}

void addMean(std::vector<PerCompute<double>>& sum, const std::vector<PerCompute<double>>& more,
             bool first, double n) {
  for (size_t s = 0; s < sum.size(); ++s) {
    for (size_t k = 0; k < PerCompute<double>::kSize; ++k) {
      double& value = sum[s].begin()[k];
      value = (first ? 0 : value) + more.at(s).begin()[k] / n;
    }
  }
}

void addMean(RecomputedUnitCost& sum, const RecomputedUnitCost& more, bool first, double n) {
  PPSTAGE_CHECK(sum.measured() == more.measured(),
                "the ranks measured different recomputation of a unit");
  addMean(sum.seconds, more.seconds, first, n);
  addMean(sum.activation_bytes, more.activation_bytes, first, n);
  addMean(sum.backward_peak_bytes, more.backward_peak_bytes, first, n);
  addMean(sum.weight_pending_bytes, more.weight_pending_bytes, first, n);
}

}  // namespace

CostProfile averageProfiles(const std::vector<CostProfile>& profiles) {
  PPSTAGE_INTERNAL_ASSERT(!profiles.empty(), "no profiles to average");
  CostProfile mean = profiles.front();
  const double n = static_cast<double>(profiles.size());
  const auto add = [n](std::vector<double>& sum, const std::vector<double>& more, bool first) {
    addMean(sum, more, first, n);
  };
  for (size_t p = 0; p < profiles.size(); ++p) {
    const CostProfile& other = profiles[p];
    PPSTAGE_CHECK(
        other.units.size() == mean.units.size() && other.microbatch_sizes == mean.microbatch_sizes,
        "the ranks measured different models: ", other.units.size(), " and ", mean.units.size(),
        " units");
    const bool first = p == 0;
    for (size_t u = 0; u < mean.units.size(); ++u) {
      UnitCost& unit = mean.units[u];
      const UnitCost& theirs = other.units[u];
      addMean(unit.seconds, theirs.seconds, first, n);
      addMean(unit.full, theirs.full, first, n);
      addMean(unit.selective, theirs.selective, first, n);
      add(unit.activation_bytes, theirs.activation_bytes, first);
      add(unit.output_bytes, theirs.output_bytes, first);
      add(unit.backward_peak_bytes, theirs.backward_peak_bytes, first);
      add(unit.weight_pending_bytes, theirs.weight_pending_bytes, first);
    }
    mean.optimizer_s_per_element =
        (first ? 0 : mean.optimizer_s_per_element) + other.optimizer_s_per_element / n;
  }
  return mean;
}

namespace {

using nlohmann::json;

// The JSON key of each compute kind, in PerCompute's kinds() order.
const char* const kKindKeys[] = {"forward_s", "backward_s", "input_grad_s", "weight_grad_s"};
static_assert(std::size(kKindKeys) == PerCompute<double>::kSize, "a key per compute kind");

// Adds `seconds` to `out`: one array per compute kind, one entry per micro-batch size.
void addSeconds(const std::vector<PerCompute<double>>& seconds, json& out) {
  for (size_t k = 0; k < PerCompute<double>::kSize; ++k) {
    std::vector<double> values;
    for (const PerCompute<double>& at : seconds) values.push_back(at.begin()[k]);
    out[kKindKeys[k]] = values;
  }
}

std::vector<PerCompute<double>> secondsOf(const json& in, size_t sizes, const std::string& path) {
  std::vector<PerCompute<double>> seconds(sizes);
  for (size_t k = 0; k < PerCompute<double>::kSize; ++k) {
    const auto values = in.at(kKindKeys[k]).get<std::vector<double>>();
    PPSTAGE_CHECK(values.size() == sizes, "unit '", path, "' has ", values.size(), " ",
                  kKindKeys[k], " for ", sizes, " micro-batch sizes");
    for (size_t s = 0; s < sizes; ++s) seconds[s].begin()[k] = values[s];
  }
  return seconds;
}

// A unit's "recompute" object: its figures per policy measured.
json recomputedJson(const UnitCost& unit) {
  json out = json::object();
  for (const RecomputePolicy policy : {RecomputePolicy::kFull, RecomputePolicy::kSelective}) {
    const RecomputedUnitCost* r = unit.recomputed(policy);
    if (r == nullptr) continue;
    json figures = {{"activation_bytes", r->activation_bytes},
                    {"backward_peak_bytes", r->backward_peak_bytes},
                    {"weight_pending_bytes", r->weight_pending_bytes}};
    addSeconds(r->seconds, figures);
    out[toString(policy)] = figures;
  }
  return out;
}

void readRecomputed(const json& in, size_t sizes, UnitCost& unit) {
  for (const RecomputePolicy policy : {RecomputePolicy::kFull, RecomputePolicy::kSelective}) {
    if (!in.contains(toString(policy))) continue;
    const json& figures = in.at(toString(policy));
    RecomputedUnitCost& r = policy == RecomputePolicy::kFull ? unit.full : unit.selective;
    r.seconds = secondsOf(figures, sizes, unit.path);
    r.activation_bytes = figures.at("activation_bytes").get<std::vector<double>>();
    r.backward_peak_bytes = figures.at("backward_peak_bytes").get<std::vector<double>>();
    r.weight_pending_bytes = figures.at("weight_pending_bytes").get<std::vector<double>>();
    PPSTAGE_CHECK(r.activation_bytes.size() == sizes && r.backward_peak_bytes.size() == sizes &&
                      r.weight_pending_bytes.size() == sizes,
                  "unit '", unit.path, "' lacks its ", toString(policy),
                  " recomputation's bytes at some of the ", sizes, " micro-batch sizes");
  }
}

json unitJson(const UnitCost& unit) {
  json out = {{"path", unit.path},
              {"param_bytes", unit.param_bytes},
              {"trainable_elements", unit.trainable_elements},
              {"flops", unit.flops},
              {"activation_bytes", unit.activation_bytes},
              {"output_bytes", unit.output_bytes},
              {"backward_peak_bytes", unit.backward_peak_bytes},
              {"weight_pending_bytes", unit.weight_pending_bytes}};
  addSeconds(unit.seconds, out);
  if (!unit.blocks.empty()) {
    out["blocks"] = unit.blocks;
    out["recompute"] = recomputedJson(unit);
  }
  return out;
}

UnitCost unitOf(const json& in, size_t sizes) {
  UnitCost unit;
  unit.path = in.at("path").get<std::string>();
  unit.param_bytes = jsonIntegerAt(in, "param_bytes", "");
  unit.trainable_elements = jsonIntegerAt(in, "trainable_elements", "");
  unit.flops = in.value("flops", 0.0);
  unit.activation_bytes = in.at("activation_bytes").get<std::vector<double>>();
  unit.output_bytes = in.at("output_bytes").get<std::vector<double>>();
  unit.backward_peak_bytes = in.at("backward_peak_bytes").get<std::vector<double>>();
  unit.weight_pending_bytes = in.value("weight_pending_bytes", unit.activation_bytes);
  unit.seconds = secondsOf(in, sizes, unit.path);
  unit.blocks = in.value("blocks", std::vector<std::string>{});
  if (in.contains("recompute")) readRecomputed(in.at("recompute"), sizes, unit);
  PPSTAGE_CHECK(
      unit.activation_bytes.size() == sizes && unit.output_bytes.size() == sizes &&
          unit.backward_peak_bytes.size() == sizes && unit.weight_pending_bytes.size() == sizes,
      "unit '", unit.path, "' lacks its bytes at some of the ", sizes, " micro-batch sizes");
  return unit;
}

// The units that share a tensor (CostProfile::ties); none in older profiles.
void readTies(const json& in, CostProfile& p) {
  if (!in.contains("ties")) return;
  for (const json& entry : in.at("ties")) {
    CostProfile::Tie tie;
    for (const json& unit : entry.at("units")) {
      tie.units.push_back(static_cast<size_t>(jsonInteger(unit, "ties: units", "")));
    }
    tie.gradient_bytes = jsonIntegerAt(entry, "gradient_bytes", "");
    PPSTAGE_CHECK(tie.gradient_bytes >= 0, "a tie's gradient_bytes must not be negative; got ",
                  tie.gradient_bytes);
    p.ties.push_back(std::move(tie));
  }
}

// The step's all-reduce over every rank as the probe measured it (LinkCosts::step_reduce_s),
// which profiles written before it lack: 0.
void readStepReduce(const json& in, CostProfile& p) {
  p.step_reduce_s = in.value("step_reduce_s", 0.0);
  p.step_reduce_ranks = in.contains("step_reduce_ranks")
                            ? static_cast<int>(jsonIntegerAt(in, "step_reduce_ranks", ""))
                            : 0;
  PPSTAGE_CHECK(p.step_reduce_s >= 0 && p.step_reduce_ranks >= 0,
                "step_reduce_s and step_reduce_ranks must not be negative");
}

// The links between hosts and the pairs probed (Note [Probing the links of a job]), which
// profiles written before them lack: 0 and none.
void readHostLinks(const json& in, CostProfile& p) {
  p.host_link_latency_s = in.value("host_link_latency_s", 0.0);
  p.host_link_bytes_per_s = in.value("host_link_bytes_per_s", 0.0);
  p.host_allreduce_latency_s = in.value("host_allreduce_latency_s", 0.0);
  p.host_allreduce_bytes_per_s = in.value("host_allreduce_bytes_per_s", 0.0);
  PPSTAGE_CHECK(p.host_link_bytes_per_s >= 0 && p.host_allreduce_bytes_per_s >= 0 &&
                    p.host_link_latency_s >= 0 && p.host_allreduce_latency_s >= 0,
                "the links between hosts must not be negative");
  if (!in.contains("probed_links")) return;
  for (const json& link : in.at("probed_links")) {
    CostProfile::ProbedLink probed;
    probed.first_rank = link.at("ranks").at(0).get<int>();
    probed.second_rank = link.at("ranks").at(1).get<int>();
    probed.first_host = link.at("hosts").at(0).get<std::string>();
    probed.second_host = link.at("hosts").at(1).get<std::string>();
    probed.latency_s = link.at("latency_s").get<double>();
    probed.bytes_per_s = link.at("bytes_per_s").get<double>();
    p.probed_links.push_back(probed);
  }
}

}  // namespace

std::string costProfileToJson(const CostProfile& p) {
  json units = json::array();
  for (const UnitCost& unit : p.units) units.push_back(unitJson(unit));
  json ties = json::array();
  for (const CostProfile::Tie& tie : p.ties) {
    ties.push_back({{"units", tie.units}, {"gradient_bytes", tie.gradient_bytes}});
  }
  json probed = json::array();
  for (const CostProfile::ProbedLink& link : p.probed_links) {
    probed.push_back({{"ranks", {link.first_rank, link.second_rank}},
                      {"hosts", {link.first_host, link.second_host}},
                      {"latency_s", link.latency_s},
                      {"bytes_per_s", link.bytes_per_s}});
  }
  const json out = {{"ppstage_cost_profile", p.version},
                    {"model", p.model},
                    {"compile_mode", p.compile_mode},
                    {"precision", p.precision},
                    {"batch_size", p.batch_size},
                    {"tp", p.tp},
                    {"tokens_per_sample", p.tokens_per_sample},
                    {"microbatch_sizes", p.microbatch_sizes},
                    {"optimizer_s_per_element", p.optimizer_s_per_element},
                    {"state_bytes_per_element", p.state_bytes_per_element},
                    {"optimizer_state_bytes_per_element", p.optimizer_state_bytes_per_element},
                    {"link_latency_s", p.link_latency_s},
                    {"link_bytes_per_s", p.link_bytes_per_s},
                    {"allreduce_latency_s", p.allreduce_latency_s},
                    {"allreduce_bytes_per_s", p.allreduce_bytes_per_s},
                    {"links", p.links},
                    {"host_link_latency_s", p.host_link_latency_s},
                    {"host_link_bytes_per_s", p.host_link_bytes_per_s},
                    {"host_allreduce_latency_s", p.host_allreduce_latency_s},
                    {"host_allreduce_bytes_per_s", p.host_allreduce_bytes_per_s},
                    {"step_reduce_s", p.step_reduce_s},
                    {"step_reduce_ranks", p.step_reduce_ranks},
                    {"probed_links", probed},
                    {"ties", ties},
                    {"core_share", p.core_share},
                    {"units", units}};
  return out.dump(2) + "\n";
}

CostProfile readCostProfile(const std::string& text, const std::string& source) {
  CostProfile p;
  try {
    const json in = json::parse(text);
    PPSTAGE_CHECK(in.is_object() && in.contains("ppstage_cost_profile"),
                  "not a ppstage cost profile (no \"ppstage_cost_profile\" version)");
    p.version = jsonIntegerAt<int>(in, "ppstage_cost_profile", "");
    PPSTAGE_CHECK(p.version == 1, "version ", p.version, " is not one this ppstage reads (1)");
    p.model = in.at("model").get<std::string>();
    p.compile_mode = in.at("compile_mode").get<std::string>();
    p.precision = in.at("precision").get<std::string>();
    p.batch_size = jsonIntegerAt(in, "batch_size", "");
    if (in.contains("tp")) p.tp = jsonIntegerAt<int>(in, "tp", "");
    p.tokens_per_sample = jsonIntegerAt(in, "tokens_per_sample", "");
    for (const json& size : in.at("microbatch_sizes")) {
      p.microbatch_sizes.push_back(jsonInteger(size, "microbatch_sizes", ""));
    }
    p.optimizer_s_per_element = in.at("optimizer_s_per_element").get<double>();
    p.state_bytes_per_element = in.at("state_bytes_per_element").get<double>();
    // Older profiles: less the fp32 gradient and bf16's master.
    p.optimizer_state_bytes_per_element =
        in.contains("optimizer_state_bytes_per_element")
            ? in.at("optimizer_state_bytes_per_element").get<double>()
            : std::max(0.0, p.state_bytes_per_element - 4.0 - (p.precision == "bf16" ? 4.0 : 0.0));
    p.link_latency_s = in.at("link_latency_s").get<double>();
    p.link_bytes_per_s = in.at("link_bytes_per_s").get<double>();
    p.allreduce_latency_s = in.at("allreduce_latency_s").get<double>();
    p.allreduce_bytes_per_s = in.at("allreduce_bytes_per_s").get<double>();
    p.links = in.at("links").get<std::string>();
    readHostLinks(in, p);
    readStepReduce(in, p);
    readTies(in, p);
    p.core_share = in.value("core_share", 0.0);  // older profiles: not known
    PPSTAGE_CHECK(p.core_share >= 0 && p.core_share <= 1, "core_share must be in [0, 1]; got ",
                  p.core_share);
    PPSTAGE_CHECK(!p.microbatch_sizes.empty() && p.microbatch_sizes.size() <= 2 &&
                      p.microbatch_sizes.front() >= 1 &&
                      std::is_sorted(p.microbatch_sizes.begin(), p.microbatch_sizes.end()),
                  "microbatch_sizes must be one or two ascending sizes of at least 1");
    PPSTAGE_CHECK(p.tp >= 1, "tp must be at least 1; got ", p.tp);
    PPSTAGE_CHECK(p.batch_size >= 1 && p.link_bytes_per_s > 0 && p.allreduce_bytes_per_s > 0,
                  "batch_size, link_bytes_per_s and allreduce_bytes_per_s must be positive");
    for (const json& unit : in.at("units")) {
      p.units.push_back(unitOf(unit, p.microbatch_sizes.size()));
    }
    PPSTAGE_CHECK(!p.units.empty(), "it has no units");
    for (const CostProfile::Tie& tie : p.ties) {
      for (const size_t u : tie.units) {
        PPSTAGE_CHECK(u < p.units.size(), "a tie names unit ", u, " of ", p.units.size());
      }
    }
  } catch (const json::exception& e) {
    PPSTAGE_FAIL("cost profile '", source, "' cannot be read: ", e.what());
  } catch (const Error& e) {
    PPSTAGE_FAIL("cost profile '", source, "': ", e.what());
  }
  return p;
}

}  // namespace ppstage
