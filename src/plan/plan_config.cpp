// See include/ppstage/plan/plan_config.h.
#include "ppstage/plan/plan_config.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "ppstage/core/batch_layout.h"
#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/core/topology.h"
#include "ppstage/core/units.h"
#include "ppstage/schedule/pipeline_schedule.h"

namespace ppstage {

// PlanCandidate's (planner.h), beside its other texts: the configuration's options.
std::string PlanCandidate::label() const {
  std::ostringstream out;
  out << schedule << " dp" << dp << " pp" << pp;
  if (stages_per_rank > 1) out << "x" << stages_per_rank << " " << toString(placement);
  if (tp > 1) out << " tp" << tp;
  out << " M" << microbatches;
  if (recompute.any()) out << " " << toString(recompute.policy) << " " << recomputeBlocksOf(*this);
  if (shard_optimizer) out << " shard_optimizer";
  if (rank_order != RankOrder::kReplicaMajor) out << " " << toString(rank_order);
  return out.str();
}

std::string recomputeBlocksOf(const PlanCandidate& c) {
  std::string counts;
  for (int n : c.recompute.blocks) counts += (counts.empty() ? "" : ",") + std::to_string(n);
  return counts;
}

std::vector<std::string> recomputeReasons(const PlanCandidate& c, const CostProfile& profile) {
  std::vector<std::string> lines;
  const auto stages = static_cast<size_t>(c.stages());
  const PlannedRecompute& r = c.recompute;
  if (!r.any() || r.blocks.size() != stages || r.plain_bytes.size() != stages ||
      r.kept_bytes.size() != stages || c.inflight.size() != stages) {
    return lines;  // not a choice the planner made (predictCandidate's of a given one)
  }
  std::vector<std::set<std::string>> blocks(stages);  // distinct: a block may span units
  size_t s = 0;
  for (size_t u = 0; u < profile.units.size(); ++u) {
    while (s < c.stage_starts.size() && u >= c.stage_starts[s]) ++s;
    blocks[s].insert(profile.units[u].blocks.begin(), profile.units[u].blocks.end());
  }
  const auto mb = [](double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MB", bytes / kBytesPerMiB);
    return std::string(text);
  };
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const int chosen = c.recompute.blocks.at(stage);
    std::ostringstream line;
    line << "stage " << stage << ": recomputes " << chosen << " of " << blocks[stage].size()
         << " blocks (" << toString(c.recompute.policy) << "): it holds " << c.inflight.at(stage)
         << " micro-batch" << (c.inflight.at(stage) == 1 ? "" : "es") << " in flight, "
         << mb(c.recompute.plain_bytes.at(stage)) << " each";
    if (chosen > 0) {
      line << " without recomputation, " << mb(c.recompute.kept_bytes.at(stage)) << " with";
    }
    lines.push_back(line.str());
  }
  return lines;
}

namespace {

// The trainable elements of `c`'s largest pipeline rank.
double largestRankElements(const PlanCandidate& c, const CostProfile& profile) {
  const Topology pipeline = Topology::forPipeline(c.stages(), c.stages_per_rank, c.placement);
  std::vector<double> stage_elements(static_cast<size_t>(c.stages()), 0.0);
  size_t s = 0;
  for (size_t u = 0; u < profile.units.size(); ++u) {
    while (s < c.stage_starts.size() && u >= c.stage_starts[s]) ++s;
    stage_elements[s] += static_cast<double>(profile.units[u].trainable_elements);
  }
  double largest = 0;
  for (int r = 0; r < pipeline.ppSize(); ++r) {
    double elements = 0;
    for (int stage : pipeline.stagesOf(r)) elements += stage_elements.at(stage);
    largest = std::max(largest, elements);
  }
  return largest;
}

// "0.25 MB a micro-batch: 10.8 ms between hosts, 0.12 ms inside one" (`between` first
// where the traffic crosses hosts).
std::string trafficText(double bytes, const char* per, double inside_s, double between_s,
                        bool crosses) {
  char text[160];
  std::snprintf(text, sizeof text, "%.2f MB a %s: %.2f ms %s, %.2f ms %s", bytes / kBytesPerMiB,
                per, 1e3 * (crosses ? between_s : inside_s),
                crosses ? "between hosts" : "inside a host", 1e3 * (crosses ? inside_s : between_s),
                crosses ? "inside one" : "between hosts");
  return text;
}

}  // namespace

std::string hostsReason(const PlanCandidate& c, const CostProfile& profile) {
  std::vector<std::string> across, inside;
  if (c.stages() > 1) {
    // The largest message of the boundaries between hosts, or of all where none crosses.
    const std::vector<int>& crossing = c.across_hosts.boundaries;
    const bool crosses = !crossing.empty();
    const double size = static_cast<double>(c.microbatch_size);
    double bytes = 0;
    for (size_t s = 0; s < c.stage_starts.size(); ++s) {
      const bool between =
          std::find(crossing.begin(), crossing.end(), static_cast<int>(s)) != crossing.end();
      if (crosses && !between) continue;
      bytes = std::max(bytes, profile.outputBytesOf(c.stage_starts[s] - 1, size));
    }
    std::string what = "the pipeline";
    if (crosses) {
      std::vector<std::string> cuts;
      for (const int s : c.across_hosts.boundaries) {
        cuts.push_back(std::to_string(s) + "->" + std::to_string(s + 1));
      }
      what = "stage boundar" + std::string(cuts.size() > 1 ? "ies " : "y ") + joinText(cuts, ", ");
    }
    (crosses ? across : inside)
        .push_back(what + " (" +
                   trafficText(bytes, "micro-batch each way", profile.messageSeconds(bytes, false),
                               profile.messageSeconds(bytes, true), crosses) +
                   ")");
  }
  if (c.dp > 1) {
    const double bytes = 4.0 * largestRankElements(c, profile);  // fp32 gradients
    const bool crosses = c.across_hosts.data_parallel;
    (crosses ? across : inside)
        .push_back("data-parallel all-reduces (" +
                   trafficText(bytes, "step", profile.allReduceSeconds(bytes, c.dp, false),
                               profile.allReduceSeconds(bytes, c.dp, true), crosses) +
                   ")");
  }
  std::string out = "ranks " + std::string(toString(c.rank_order));
  if (!across.empty()) out += "; across hosts: " + joinText(across, "; ");
  if (!inside.empty()) out += "; inside hosts: " + joinText(inside, "; ");
  return out;
}

std::string shardingReason(const PlanCandidate& c, const CostProfile& profile) {
  if (!c.shard_optimizer) return "";
  const double largest = largestRankElements(c, profile);
  const double fp32_gradient = 4.0;  // whole either way
  const double whole = profile.stateBytesPerElement(c.dp, false) - fp32_gradient;
  const double shared = profile.stateBytesPerElement(c.dp, true) - fp32_gradient;
  char line[256];
  std::snprintf(line, sizeof line,
                "optimizer sharded over %d replicas: %.1f MB of state and fp32 masters on the "
                "largest rank instead of %.1f MB, and 1/%d of its optimizer step",
                c.dp, shared * largest / kBytesPerMiB, whole * largest / kBytesPerMiB, c.dp);
  return line;
}

PlanRequest planRequestOf(const PlanConfig& plan, int ranks, int tp,
                          const ScheduleRegistry& registry, const std::vector<int>& job_hosts) {
  PPSTAGE_CHECK(tp >= 1 && ranks % tp == 0, "a plan of ", ranks,
                " ranks needs a number of ranks that --train.tp ", tp,
                " divides: each pipeline rank of each replica is a tensor-parallel group of ", tp);
  PlanRequest request;
  request.ranks = ranks / tp;
  request.tp = tp;
  request.memory_budget_bytes = plan.memory_mb * kBytesPerMiB;
  request.keep = static_cast<int>(plan.top);
  request.schedules = plan.schedules.empty() ? registry.names() : plan.schedules;
  if (plan.hosts > 0) {
    PPSTAGE_CHECK(ranks % plan.hosts == 0, "--plan.hosts ", plan.hosts, " cannot hold ", ranks,
                  " ranks evenly");
    const int per_host = ranks / static_cast<int>(plan.hosts);
    for (int r = 0; r < ranks; ++r) request.host_of_rank.push_back(r / per_host);
  } else if (static_cast<int>(job_hosts.size()) == ranks) {
    request.host_of_rank = job_hosts;
  }
  if (std::count(request.host_of_rank.begin(), request.host_of_rank.end(), 0) ==
      static_cast<std::ptrdiff_t>(request.host_of_rank.size())) {
    request.host_of_rank.clear();  // one host
  }
  for (const std::string& name : request.schedules) {
    if (registry.find(name) != nullptr) continue;
    std::string known;
    for (const std::string& n : registry.names()) known += (known.empty() ? "" : ", ") + n;
    PPSTAGE_FAIL("--plan.schedules names '", name, "', which is not a registered schedule (", known,
                 "; more with --pipeline.schedule_plugin)");
  }
  return request;
}

void checkProfileTp(const CostProfile& profile, int tp, const std::string& source) {
  PPSTAGE_CHECK(profile.tp == tp, "cost profile '", source, "' was measured with ",
                profile.tp > 1 ? "its units sharded over --train.tp " : "--train.tp ", profile.tp,
                "; this plan has --train.tp ", tp, " (measure the costs again at this tp)");
}

std::vector<std::string> splitPointsOf(const PlanCandidate& candidate, const CostProfile& profile) {
  std::vector<std::string> points;
  for (size_t start : candidate.stage_starts) points.push_back(profile.units.at(start).path);
  return points;
}

PlanCandidate candidateOf(const Config& config, const Topology& pipeline) {
  PlanCandidate c;
  c.schedule = config.pipeline.schedule;
  c.dp = pipeline.dpSize();
  c.pp = pipeline.ppSize();
  c.tp = pipeline.tpSize();
  c.stages_per_rank = pipeline.stagesPerRank();
  c.placement = pipeline.placement();
  c.microbatches =
      scheduleOptionsFor(config.pipeline, pipeline.numStages(), pipeline.stagesPerRank())
          .microbatches;
  c.microbatch_size = batchLayout(config.train.batch_size, c.dp, c.microbatches).microbatch_size;
  c.shard_optimizer = config.train.shard_optimizer && c.dp > 1;
  c.rank_order = pipeline.rankOrder();
  c.across_hosts = hostCrossings(pipeline);
  return c;
}

void applyCandidate(const PlanCandidate& c, const CostProfile& profile, Config& config) {
  PipelineConfig& p = config.pipeline;
  p.stages = c.stages();
  p.split_points = splitPointsOf(c, profile);
  p.schedule = c.schedule;
  p.microbatches = c.microbatches;
  p.stages_per_rank = c.stages_per_rank;
  p.placement = c.placement;
  p.rank_order = c.rank_order;
  config.train.dp = c.dp;
  config.train.tp = c.tp;
  config.train.shard_optimizer = c.shard_optimizer;
  if (c.recompute.any()) {
    config.train.recompute = c.recompute.policy;
    config.train.recompute_blocks = recomputeBlocksOf(c);
  }
}

namespace {

// Options the plan decides, or that only ask for a plan: never copied from the user's.
bool chosenByPlan(const std::string& name) {
  static const char* const kChosen[] = {"pipeline.stages",
                                        "pipeline.split_points",
                                        "pipeline.balance",
                                        "pipeline.schedule",
                                        "pipeline.microbatches",
                                        "pipeline.stages_per_rank",
                                        "pipeline.placement",
                                        "pipeline.rank_order",
                                        "pipeline.auto",
                                        "train.dp",
                                        "train.tp",
                                        "train.shard_optimizer",
                                        "config",
                                        "help",
                                        "json",
                                        "write-config"};
  for (const char* chosen : kChosen) {
    if (name == chosen) return true;
  }
  return name.rfind("plan.", 0) == 0;
}

}  // namespace

std::string configIniOf(const std::map<std::string, std::string>& given, const PlanCandidate& c,
                        const CostProfile& profile, const std::string& header) {
  // section -> key -> text
  std::map<std::string, std::map<std::string, std::string>> sections;
  for (const auto& [name, text] : given) {
    const size_t dot = name.find('.');
    if (chosenByPlan(name) || dot == std::string::npos) continue;
    sections[name.substr(0, dot)][name.substr(dot + 1)] = text;
  }
  std::map<std::string, std::string>& pipeline = sections["pipeline"];
  pipeline["stages"] = std::to_string(c.stages());
  const std::vector<std::string> points = splitPointsOf(c, profile);
  std::string joined;
  for (const std::string& point : points) joined += (joined.empty() ? "" : ",") + point;
  if (!joined.empty()) pipeline["split_points"] = joined;
  pipeline["schedule"] = c.schedule;
  pipeline["microbatches"] = std::to_string(c.microbatches);
  pipeline["stages_per_rank"] = std::to_string(c.stages_per_rank);
  pipeline["placement"] = toString(c.placement);
  pipeline["rank_order"] = toString(c.rank_order);
  sections["train"]["dp"] = std::to_string(c.dp);
  sections["train"]["tp"] = std::to_string(c.tp);
  sections["train"]["shard_optimizer"] = c.shard_optimizer ? "true" : "false";
  sections["train"]["batch_size"] = std::to_string(profile.batch_size);  // what was planned
  if (c.recompute.any()) {
    sections["train"]["recompute"] = toString(c.recompute.policy);
    sections["train"]["recompute_blocks"] = recomputeBlocksOf(c);
  }
  std::ostringstream out;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  for (const auto& [section, keys] : sections) {
    out << "\n[" << section << "]\n";
    for (const auto& [key, text] : keys) out << key << " = " << text << "\n";
  }
  return out.str();
}

}  // namespace ppstage
