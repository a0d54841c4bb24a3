// `ppstage plan`: measure the model's units once, then pick the pipeline configuration of
// P ranks with the fastest predicted step that fits the memory budget (plan/planner.h).
#include "commands.h"

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/options.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/environment.h"
#include "ppstage/core/file.h"
#include "ppstage/core/units.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/plan/plan_config.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/train/auto_plan.h"
#include "ppstage/train/job_setup.h"
#include "run_command.h"

namespace ppstage::cli {

namespace {

using Clock = std::chrono::steady_clock;

// The profile to plan with: read from --plan.costs, or measured on every rank of `world`
// (measuredProfile; none: this process alone), and saved with --plan.save_costs.
CostProfile costProfileOf(const Config& config, int ranks, Communicator* world) {
  const int tp = static_cast<int>(config.train.tp);
  if (!config.plan.costs.empty()) {
    CostProfile profile =
        readCostProfile(readFile(config.plan.costs, "cost profile"), config.plan.costs);
    checkProfileTp(profile, tp, config.plan.costs);
    return profile;
  }
  PPSTAGE_CHECK(tp == 1 || world != nullptr, "--train.tp ", tp,
                ": a plan measures each unit sharded over its tensor-parallel group, the "
                "group's ranks running at once; run it under mpirun -np ",
                config.plan.ranks, ", or plan from --plan.costs measured so");
  CostProfile profile = measuredProfile(config, nullptr, ranks, world);
  if (!config.plan.save_costs.empty() && (world == nullptr || world->rank() == 0)) {
    writeFileAtomically(config.plan.save_costs, costProfileToJson(profile));
  }
  return profile;
}

// `path` parsed as `ppstage train --config path` parses it, with the layout its schedule
// needs filled in as train fills it (defaultScheduleLayout).
Config parsedAsTrain(const std::string& path) {
  Config config;
  po::options_description options;
  addAllOptions(options, config);
  const char* const argv[] = {"train", "--config", path.c_str()};
  std::set<std::string> given;
  std::ostringstream unused;
  parseOptions(3, argv, options, "", unused, &given);
  defaultScheduleLayout(makeScheduleRegistry(config.pipeline.schedule_plugin), config.pipeline,
                        given);
  return config;
}

// Writes the chosen configuration to `path` (configIniOf) once train accepts it on the
// planned ranks (checkTrainable). A --checkpoint.dir that holds another run's checkpoints
// without --checkpoint.resume is left out, with the reason in the file's header: train
// would refuse it.
void writeConfig(const std::string& path, std::map<std::string, std::string> given,
                 const PlanCandidate& chosen, const CostProfile& profile,
                 const PlanRequest& request) {
  const int ranks = request.ranks * request.tp;
  std::ostringstream header;
  header << "ppstage plan: " << chosen.label() << ", predicted step " << chosen.step_s
         << " s\nrun: mpirun -np " << ranks << " ppstage train --config " << path;
  const std::string checking = path + ".checking";
  writeFileAtomically(checking, configIniOf(given, chosen, profile, header.str()));
  try {
    Config config = parsedAsTrain(checking);
    try {
      checkFreshCheckpoints(config.checkpoint);
    } catch (const Error& e) {
      header << "\ncheckpoint.dir left out: " << e.what();
      given.erase("checkpoint.dir");
      writeFileAtomically(checking, configIniOf(given, chosen, profile, header.str()));
      config = parsedAsTrain(checking);
    }
    checkTrainable(config, ranks);
  } catch (const Error& e) {
    std::remove(checking.c_str());
    PPSTAGE_FAIL("--write-config '", path, "': train would refuse the chosen configuration with ",
                 "these options, so nothing was written: ", e.what());
  }
  PPSTAGE_CHECK(std::rename(checking.c_str(), path.c_str()) == 0, "cannot write --write-config '",
                path, "': ", std::strerror(errno));
}

// A note where the planned ranks outnumber this machine's cores (empty where they do not):
// how the costs were measured, and what the prediction does not see.
std::string sharedCoresNote(const CostProfile& profile, int64_t ranks, bool measured) {
  const int64_t here = environment::localRanks().value_or(ranks);
  const int cores = coresOfThisMachine();
  if (here <= cores) return "";
  std::ostringstream note;
  note << "note: " << here << " ranks share this machine's " << cores << " cores. ";
  if (measured && profile.links.rfind("measured over", 0) == 0) {
    char share[64];
    std::snprintf(share, sizeof share, "%.2f", profile.core_share);
    note << "Their costs were measured in turns, " << share
         << " of a core a thread; the simulator gives a rank more of the cores while others "
            "wait and less while more compute, as a run does (docs/architecture.md, shared "
            "cores).";
  } else if (measured) {
    note << "One process measured the costs alone; the prediction takes each rank to compute "
            "on cores of its own: plan under mpirun -np "
         << ranks << " to simulate the ranks sharing them.";
  } else if (profile.core_share > 0) {
    note << "The costs were read from --plan.costs (" << profile.links
         << "); the prediction shares the cores as the job that measured them did.";
  } else {
    note << "The costs were read from --plan.costs (" << profile.links
         << "); the prediction takes each rank to compute on cores of its own.";
  }
  return note.str();
}

// What `c` recomputes: its policy, the blocks per stage (--train.recompute_blocks) and why.
nlohmann::json recomputeJson(const PlanCandidate& c, const CostProfile& profile) {
  if (!c.recompute.any()) return {{"policy", "none"}};
  return {{"policy", toString(c.recompute.policy)},
          {"blocks", c.recompute.blocks},
          {"reasons", recomputeReasons(c, profile)}};
}

nlohmann::json candidateJson(const PlanCandidate& c, const CostProfile& profile) {
  if (c.microbatches == 0) return nullptr;
  return {{"schedule", c.schedule},
          {"dp", c.dp},
          {"pp", c.pp},
          {"tp", c.tp},
          {"stages", c.stages()},
          {"stages_per_rank", c.stages_per_rank},
          {"placement", toString(c.placement)},
          {"microbatches", c.microbatches},
          {"microbatch_size", c.microbatch_size},
          {"split_points", splitPointsOf(c, profile)},
          {"predicted_step_s", c.step_s},
          {"makespan_s", c.makespan_s},
          {"tail_s", c.tail_s},
          {"tokens_per_s", c.tokens_per_s},
          {"peak_memory_mb", c.peak_bytes / kBytesPerMiB},
          {"bubble", c.bubble},
          {"inflight", c.inflight},
          {"recompute", recomputeJson(c, profile)},
          {"shard_optimizer", c.shard_optimizer},
          {"rank_order", toString(c.rank_order)},
          {"across_hosts",
           {{"boundaries", c.across_hosts.boundaries},
            {"data_parallel", c.across_hosts.data_parallel}}}};
}

// The links the plan charged: inside a host and, where measured, between hosts, and each
// pair the probe measured.
nlohmann::json linksJson(const CostProfile& profile) {
  const auto line = [](double latency_s, double bytes_per_s) -> nlohmann::json {
    if (bytes_per_s <= 0) return nullptr;
    return {{"latency_s", latency_s}, {"bytes_per_s", bytes_per_s}};
  };
  nlohmann::json pairs = nlohmann::json::array();
  for (const CostProfile::ProbedLink& link : profile.probed_links) {
    pairs.push_back({{"ranks", {link.first_rank, link.second_rank}},
                     {"hosts", {link.first_host, link.second_host}},
                     {"latency_s", link.latency_s},
                     {"bytes_per_s", link.bytes_per_s}});
  }
  return {{"message", line(profile.link_latency_s, profile.link_bytes_per_s)},
          {"all_reduce", line(profile.allreduce_latency_s, profile.allreduce_bytes_per_s)},
          {"host_message", line(profile.host_link_latency_s, profile.host_link_bytes_per_s)},
          {"host_all_reduce",
           line(profile.host_allreduce_latency_s, profile.host_allreduce_bytes_per_s)},
          {"step_reduce_s", profile.step_reduce_s},
          {"probed", pairs}};
}

// The number of hosts `request` plans for.
int hostsOf(const PlanRequest& request) { return hostCountOf(request.host_of_rank); }

nlohmann::json planJson(const Plan& plan, const CostProfile& profile, const PlanConfig& config,
                        const PlanRequest& request, double measure_s, double plan_s) {
  nlohmann::json best = nlohmann::json::array();
  for (const PlanCandidate& c : plan.best) best.push_back(candidateJson(c, profile));
  return {{"ranks", config.ranks},
          {"tp", profile.tp},
          {"cores", coresOfThisMachine()},
          {"shared_cores_note", sharedCoresNote(profile, config.ranks, config.costs.empty())},
          {"memory_mb", config.memory_mb},
          {"model", profile.model},
          {"compile_mode", profile.compile_mode},
          {"batch_size", profile.batch_size},
          {"units", profile.units.size()},
          {"links", profile.links},
          {"hosts", hostsOf(request)},
          {"link_costs", linksJson(profile)},
          {"measure_s", measure_s},
          {"plan_s", plan_s},
          {"candidates", plan.candidates},
          {"simulated", plan.simulated},
          {"refused", plan.refused},
          {"over_budget", plan.over_budget},
          {"chosen", candidateJson(plan.best.front(), profile)},
          {"default", candidateJson(plan.default_config, profile)},
          {"best", best}};
}

// What `c` does to save memory, for the table's `memory` column: "shard" (its optimizer
// sharded), its recomputation ("full 4,1"), both, or "-".
std::string memoryChoiceOf(const PlanCandidate& c) {
  std::string out = c.shard_optimizer ? "shard" : "";
  if (c.recompute.any()) {
    out += (out.empty() ? "" : "+") + std::string(toString(c.recompute.policy)) + " " +
           recomputeBlocksOf(c);
  }
  return out.empty() ? "-" : out;
}

// What of `c`'s traffic crosses hosts, for the table's `across` column: "pp 0->1", "dp",
// "pp 0->1,dp" or "-".
std::string acrossHostsOf(const PlanCandidate& c) {
  std::vector<std::string> parts;
  if (!c.across_hosts.boundaries.empty()) {
    std::vector<std::string> cuts;
    for (const int s : c.across_hosts.boundaries) {
      cuts.push_back(std::to_string(s) + "->" + std::to_string(s + 1));
    }
    parts.push_back("pp " + joinText(cuts, ","));
  }
  if (c.across_hosts.data_parallel) parts.push_back("dp");
  return parts.empty() ? "-" : joinText(parts, ",");
}

// One row of the table; with `hosts`, the rank order and what crosses them too.
void printRow(const char* rank, const PlanCandidate& c, const CostProfile& profile, bool hosts) {
  std::string points;
  for (const std::string& p : splitPointsOf(c, profile)) points += (points.empty() ? "" : ",") + p;
  char across[64] = "";
  if (hosts) {
    std::snprintf(across, sizeof across, " %-8s %-10s", toString(c.rank_order),
                  acrossHostsOf(c).c_str());
  }
  std::printf("%-4s %-16s %3d %3d %3d %-4s %4d %5lld %9.4f %11.0f %9.1f %6.3f  %-12s%s %s\n", rank,
              c.schedule.c_str(), c.dp, c.pp, c.stages_per_rank, toString(c.placement),
              c.microbatches, static_cast<long long>(c.microbatch_size), c.step_s, c.tokens_per_s,
              c.peak_bytes / kBytesPerMiB, c.bubble, memoryChoiceOf(c).c_str(), across,
              points.empty() ? "-" : points.c_str());
}

// "inside a host 28 us, 3.10 GB/s (all-reduce 2.20 GB/s)".
std::string linkText(double latency_s, double bytes_per_s, double all_reduce_bytes_per_s) {
  char text[128];
  std::snprintf(text, sizeof text, "%.0f us, %.3f GB/s (all-reduce %.3f GB/s)", latency_s * 1e6,
                bytes_per_s / 1e9, all_reduce_bytes_per_s / 1e9);
  return text;
}

// The links a plan over several hosts charged, and the pairs probed.
void printLinks(const CostProfile& profile) {
  std::printf(
      "links inside a host: %s; between hosts: %s\n",
      linkText(profile.link_latency_s, profile.link_bytes_per_s, profile.allreduce_bytes_per_s)
          .c_str(),
      profile.hasHostLinks()
          ? linkText(profile.host_link_latency_s, profile.host_link_bytes_per_s,
                     profile.host_allreduce_bytes_per_s)
                .c_str()
          : "not measured (charged as inside: measure under mpirun across the hosts)");
  for (const CostProfile::ProbedLink& link : profile.probed_links) {
    std::printf("  probed %s-%s (ranks %d, %d): %.0f us, %.3f GB/s\n", link.first_host.c_str(),
                link.second_host.c_str(), link.first_rank, link.second_rank, link.latency_s * 1e6,
                link.bytes_per_s / 1e9);
  }
}

void printPlan(const Plan& plan, const CostProfile& profile, const PlanConfig& config,
               const PlanRequest& request, double measure_s, double plan_s) {
  const bool hosts = hostsOf(request) > 1;
  const std::string groups = profile.tp > 1
                                 ? " (" + std::to_string(config.ranks / profile.tp) +
                                       " groups of --train.tp " + std::to_string(profile.tp) + ")"
                                 : "";
  std::printf(
      "plan for %lld ranks%s: %s (%s), batch %lld, %zu units; measured in %.1f s, "
      "planned in %.2f s\n",
      static_cast<long long>(config.ranks), groups.c_str(), profile.model.c_str(),
      profile.compile_mode.c_str(), static_cast<long long>(profile.batch_size),
      profile.units.size(), measure_s, plan_s);
  const std::string note = sharedCoresNote(profile, config.ranks, config.costs.empty());
  if (!note.empty()) std::printf("%s\n", note.c_str());
  std::printf(
      "%lld candidates, %lld simulated, %lld refused by their schedule, %lld over the "
      "memory budget%s\n\n",
      static_cast<long long>(plan.candidates), static_cast<long long>(plan.simulated),
      static_cast<long long>(plan.refused), static_cast<long long>(plan.over_budget),
      config.memory_mb > 0 ? "" : " (none given)");
  if (hosts) {
    std::printf("%zu ranks on %d hosts; ", request.host_of_rank.size(), hostsOf(request));
    printLinks(profile);
    std::printf("\n");
  }
  std::printf("%-4s %-16s %3s %3s %3s %-4s %4s %5s %9s %11s %9s %6s  %-12s%s %s\n", "#", "schedule",
              "dp", "pp", "spr", "plc", "M", "mb", "step_s", "tokens/s", "peak_MB", "bubble",
              "memory", hosts ? " order    across    " : "", "split points");
  for (size_t i = 0; i < plan.best.size(); ++i) {
    printRow(std::to_string(i + 1).c_str(), plan.best[i], profile, hosts);
  }
  const PlanCandidate& chosen = plan.best.front();
  if (plan.default_config.microbatches > 0) {
    printRow("dflt", plan.default_config, profile, hosts);
    std::printf(
        "\nchosen: %s, predicted %.4f s a step, %.2fx the default (1f1b, M = 2 x "
        "stages, balanced by %s)\n",
        chosen.label().c_str(), chosen.step_s, plan.default_config.step_s / chosen.step_s,
        defaultBalanceOf(profile));
  } else {
    std::printf("\nchosen: %s, predicted %.4f s a step\n", chosen.label().c_str(), chosen.step_s);
  }
  for (const std::string& line : recomputeReasons(chosen, profile)) {
    std::printf("  %s\n", line.c_str());
  }
  const std::string sharding = shardingReason(chosen, profile);
  if (!sharding.empty()) std::printf("  %s\n", sharding.c_str());
  if (hosts) std::printf("  %s\n", hostsReason(chosen, profile).c_str());
}

}  // namespace

namespace {

// What `ppstage plan` was asked for.
struct PlanCommand {
  Config config;
  bool json = false;
  std::string write_config;
  std::map<std::string, std::string> given;  // the options as given, for --write-config
};

// Parses and validates argv into `command`; false when --help was asked for.
bool parsePlanCommand(int argc, const char* const* argv, PlanCommand& command) {
  Config& config = command.config;
  po::options_description options;
  addModelOptions(options, config.model);
  addTrainOptions(options, config.train);
  addTrainingLoopOptions(options, config.train);
  addCompileOptions(options, config.compile);
  addDataOptions(options, config.data);
  addSchedulePluginOption(options, config.pipeline);
  addPlanOptions(options, config.plan);
  po::options_description output("Output");
  output.add_options()("json", po::bool_switch(&command.json),
                       "print the plan as JSON (chosen, default, best: schedule, dp, pp, "
                       "stages_per_rank, placement, microbatches, split_points, "
                       "predicted_step_s, tokens_per_s, peak_memory_mb, bubble, rank_order, "
                       "across_hosts; and hosts, link_costs)")(
      "write-config", po::value(&command.write_config),
      "write the chosen configuration, with the options given here, as an INI file that "
      "`ppstage train --config` runs");
  options.add(output);
  const char* usage =
      "usage: mpirun -np P ppstage plan [--config FILE] [options] [--plan.memory_mb M]\n"
      "           [--json] [--write-config OUT.ini]\n"
      "       ppstage plan --plan.ranks P [options]   (one process: the links assumed)\n\n"
      "Measures every unit of the model once (F, B, I and W seconds and the activation\n"
      "bytes of one micro-batch, at two micro-batch sizes, in --compile.mode; under\n"
      "mpirun also the links between the ranks), then predicts every configuration of P\n"
      "ranks: dp x pp layouts, schedules, micro-batch counts, stages per rank 1-4 (in a\n"
      "loop; in a V at 2), each with its best cut; the step by the schedule's simulator\n"
      "plus the optimizer and gradient all-reduce, the peak memory per rank from the\n"
      "simulated in-flight micro-batches. Prints the fastest that fit --plan.memory_mb,\n"
      "and the default 1f1b configuration beside them.";
  if (!parseOptions(argc, argv, options, usage, std::cout, nullptr, &command.given)) return false;
  validate(config.model);
  validate(config.train);
  validate(config.compile);
  validate(config.data);
  validate(config.plan);
  return true;
}

// The ranks to plan for: --plan.ranks, or under mpirun the job's.
int ranksToPlan(const PlanConfig& plan, int world) {
  const int64_t ranks = plan.ranks == 0 && world > 1 ? world : plan.ranks;
  PPSTAGE_CHECK(ranks >= 1,
                "--plan.ranks must name the ranks to plan for (or run under mpirun -np P)");
  return static_cast<int>(ranks);
}

// Rank 0's part, with the profile: plan, report.
int planAndReport(PlanCommand& command, const CostProfile& profile, double measure_s) {
  Config& config = command.config;
  const ScheduleRegistry registry = makeScheduleRegistry(config.pipeline.schedule_plugin);
  PlanRequest request =
      planRequestOf(config.plan, static_cast<int>(config.plan.ranks),
                    static_cast<int>(config.train.tp), registry, mpiHostOfRanks());
  if (config.plan.hosts == 0) request.cpus = jobCpuLayout(config, request.ranks * request.tp);
  const Clock::time_point start = Clock::now();
  const Plan plan = planPipeline(profile, request, registry);
  const double plan_s = secondsSince(start);
  if (!command.write_config.empty()) {
    PPSTAGE_CHECK(profile.model == config.model.name, "cost profile '", config.plan.costs,
                  "' was measured for --model.name '", profile.model,
                  "'; a config written for it needs the same model (got '", config.model.name,
                  "')");
    writeConfig(command.write_config, command.given, plan.best.front(), profile, request);
  }
  if (command.json) {
    std::cout << planJson(plan, profile, config.plan, request, measure_s, plan_s).dump(2)
              << std::endl;
  } else {
    printPlan(plan, profile, config.plan, request, measure_s, plan_s);
  }
  return 0;
}

}  // namespace

int planMain(int argc, const char* const* argv) {
  PlanCommand command;
  if (!parsePlanCommand(argc, argv, command)) return 0;
  const bool measures = command.config.plan.costs.empty();
  if (measures) installCountingAllocator();  // as train does, before the model's tensors
  MpiSession mpi;
  return runCommand([&] {
    // Under mpirun every rank measures (and the links between them); rank 0 plans.
    command.config.plan.ranks = ranksToPlan(command.config.plan, mpi.worldSize());
    std::unique_ptr<Communicator> world;
    if (mpi.worldSize() >= 2) world = MpiCommunicator::world();
    const Clock::time_point start = Clock::now();
    const CostProfile profile =
        costProfileOf(command.config, static_cast<int>(command.config.plan.ranks),
                      measures ? world.get() : nullptr);
    if (mpi.worldRank() != 0) return 0;
    return planAndReport(command, profile, secondsSince(start));
  });
}

}  // namespace ppstage::cli
