// See run_summary.h.
#include "run_summary.h"

#include "local_stages.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <ostream>
#include <string>

#include "ppstage/comm/communicator.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/config.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/host_name.h"
#include "ppstage/core/statistics.h"
#include "ppstage/core/units.h"
#include "ppstage/observe/parameter_files.h"
#include "ppstage/train/job_setup.h"

namespace ppstage {
namespace {

// Every model path of these stages -> its tensor.
// Every path of `stages`' tensors: their values as the optimizer steps them (bf16: the fp32
// master weights, `runner`'s).
std::map<std::string, at::Tensor> namedParameters(const RankModel& model,
                                                  const StepRunner& runner) {
  std::map<std::string, at::Tensor> named;
  for (StageModule* stage : model.mine) {
    for (const StageParameter& p : stage->parameters) {
      if (p.random_key) continue;  // not model state
      at::Tensor value = runner.storedValueOf(p.value);
      if (p.shard.sharded()) value = gatherShards(value, p.shard, *model.tp_group);
      named[p.name] = value;
      for (const std::string& alias : p.aliases) named[alias] = value;
    }
  }
  return named;
}

// What this rank measured of itself (RankMetrics::forEachOwnFigure).
RankMetrics ownFigures(const RunRecord& record, CompileCache& cache, const StepRunner& runner) {
  cache.countOptimizedGraphs();
  const CompileStats& stats = cache.stats();
  RankMetrics mine;
  mine.peak_rss_mb = peakRssMb();
  mine.recompute_s = cache.recomputeStats().seconds;
  mine.optimizer_state_mb = static_cast<double>(runner.optimizerStateBytes()) / kBytesPerMiB;
  mine.master_weights_mb = static_cast<double>(runner.masterBytes()) / kBytesPerMiB;
  mine.graphs_compiled = stats.graphs_compiled;
  mine.cache_hits = stats.cache_hits;
  mine.respecializations = stats.respecializations;
  mine.specializations_per_graph = stats.specializations_per_graph;
  mine.fusion_groups = stats.fusion_groups;
  mine.differentiable_graphs = stats.differentiable_graphs;
  mine.max_step_rss_mb = *std::max_element(record.rss_mb.begin(), record.rss_mb.end());
  mine.rss_growth_mb_per_100_steps = growthPer100Steps(record.rss_mb);
  mine.tensor_growth_mb_per_100_steps = growthPer100Steps(record.tensor_mb);
  mine.open_fds_start = record.open_fds_start;
  mine.open_fds_end = openFileDescriptors();
  for (const ActionKind kind : PerCompute<double>::kinds()) {
    mine.action_s[kind] = median(record.my_action_s[kind]);
  }
  mine.tail_s = median(record.my_tail_s);
  for (const ActionKind kind : PerTransfer<double>::kinds()) {
    mine.wait_s[kind] = median(record.my_wait_s[kind]);
  }
  mine.receive_buffers = record.receive_buffers_allocated;
  mine.tp_s = median(record.my_tp_s);
  mine.tp_all_reduces = static_cast<long long>(median(record.my_tp_all_reduces));
  mine.transfer_s = record.transfers.sum;
  mine.transfers = record.transfers.count;
  return mine;
}

// Every rank's figures, with the job's view of each (its stages, and from the steps'
// all-reduces its busy seconds and tensor peaks), and the compile counts summed over them.
void addRanks(const Topology& topology, const RunRecord& record, std::vector<RankMetrics> ranks,
              RunMetrics& metrics) {
  for (int rank = 0; rank < topology.worldSize(); ++rank) {
    RankMetrics& rm = ranks[static_cast<size_t>(rank)];
    rm.rank = rank;
    rm.stages = topology.stagesOf(topology.ppRankOf(rank));
    rm.busy_s = record.busy_s[static_cast<size_t>(rank)];
    rm.peak_allocated_mb = record.peak_allocated_mb[static_cast<size_t>(rank)];
    rm.peak_activation_mb = record.peak_activation_mb[static_cast<size_t>(rank)];
    rm.idle_s = std::max(0.0, record.wall_s - rm.busy_s);
    CompileMetrics& job = metrics.compile;
    job.graphs_compiled += rm.graphs_compiled;
    job.cache_hits += rm.cache_hits;
    job.respecializations += rm.respecializations;
    job.specializations_per_graph =
        std::max(job.specializations_per_graph, rm.specializations_per_graph);
    job.fusion_groups += rm.fusion_groups;
    job.differentiable_graphs += rm.differentiable_graphs;
  }
  metrics.ranks = std::move(ranks);
}

// What ran, and the step figures.
RunMetrics runMetrics(const Config& config, const JobLayout& layout, const Dataset* data,
                      const RunRecord& record) {
  RunMetrics metrics;
  metrics.model = config.model.name;
  metrics.schedule = layout.schedule.name;
  metrics.compile.mode = toString(config.compile.mode);
  metrics.data = data != nullptr ? data->describe() : "";
  metrics.stages = layout.topology.numStages();
  metrics.pp = layout.topology.ppSize();
  metrics.dp = layout.topology.dpSize();
  metrics.tp = layout.topology.tpSize();
  metrics.microbatches = layout.batch.microbatches;
  metrics.batch_size = config.train.batch_size;
  const auto mean = [](const std::vector<int64_t>& v) {
    double sum = 0;
    for (const int64_t x : v) sum += static_cast<double>(x);
    return std::llround(sum / static_cast<double>(std::max<size_t>(1, v.size())));
  };
  metrics.tokens_per_step = mean(record.tokens);
  metrics.padded_tokens_per_step = mean(record.padded_tokens);
  metrics.step_tokens.assign(record.tokens.begin(), record.tokens.end());
  metrics.precision = layout.compute_dtype == at::kBFloat16 ? "bf16" : "fp32";
  metrics.message_bytes.assign(layout.message_bytes.begin(), layout.message_bytes.end());
  metrics.params_dir = config.output.params_dir;
  metrics.resumed_from = record.resumed_from;
  metrics.resume_s = record.resume_s;
  metrics.first_step = record.first_step;
  metrics.checkpoints = record.checkpoints;
  metrics.eval = record.eval;
  metrics.skipped_steps = record.skipped_steps;
  metrics.stopped_by = record.stopped_by;
  metrics.losses = record.losses;
  metrics.accuracies = record.accuracies;
  metrics.learning_rates = record.learning_rates;
  metrics.step_time_s = record.step_time_s;
  metrics.bubble_fraction = record.bubble_fraction;
  metrics.final_loss = metrics.losses.back();
  metrics.measured_step_s = median(metrics.step_time_s);
  metrics.compile.compile_time_s = warmupOverhead(metrics.step_time_s);
  std::vector<double> throughput;
  for (size_t i = 0; i < metrics.step_time_s.size(); ++i) {
    throughput.push_back(static_cast<double>(record.tokens.at(i)) / metrics.step_time_s[i]);
  }
  metrics.tokens_per_s = median(throughput);
  metrics.throughput_unit = layout.token_inputs ? "tokens" : "samples";
  return metrics;
}

// Every stage's F, B, I and W seconds: the medians over steps its ranks measured, averaged
// over its data-parallel ranks (0 for a kind it does not run). Collective over `world`.
std::vector<PerCompute<double>> stageActionCosts(const Topology& topology, const RunRecord& record,
                                                 Communicator& world) {
  const auto stages = static_cast<int64_t>(topology.numStages());
  constexpr auto kKinds = static_cast<int64_t>(PerCompute<double>::kSize);
  // [seconds of stage s, kind k] then [ranks that measured them], each stages x kinds.
  at::Tensor sums = at::zeros({2, stages, kKinds}, at::kDouble);
  auto acc = sums.accessor<double, 3>();
  const std::vector<int> mine = topology.myStages();
  for (size_t i = 0; i < mine.size() && i < record.my_stage_action_s.size(); ++i) {
    int64_t k = 0;
    for (const std::vector<double>& seconds : record.my_stage_action_s[i]) {
      if (!seconds.empty()) {
        acc[0][mine[i]][k] += median(seconds);
        acc[1][mine[i]][k] += 1;
      }
      ++k;
    }
  }
  world.allReduceSum({sums});
  std::vector<PerCompute<double>> costs(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s) {
    int64_t k = 0;
    for (double& cost : costs[static_cast<size_t>(s)]) {
      const double ranks = acc[1][s][k];
      cost = ranks > 0 ? acc[0][s][k] / ranks : 0;
      ++k;
    }
  }
  return costs;
}

// Into each stage's `recompute` entry, the most bytes one of its micro-batches kept, in MB,
// averaged over its data-parallel ranks. Collective over `world`.
void addKeptBytes(const Topology& topology, const RunRecord& record, Communicator& world,
                  std::vector<StageRecompute>& recompute) {
  const auto stages = static_cast<int64_t>(topology.numStages());
  at::Tensor sums = at::zeros({2, stages}, at::kDouble);  // bytes, then ranks
  auto acc = sums.accessor<double, 2>();
  const std::vector<int> mine = topology.myStages();
  for (size_t i = 0; i < mine.size() && i < record.my_stage_kept_bytes.size(); ++i) {
    acc[0][mine[i]] += record.my_stage_kept_bytes[i];
    acc[1][mine[i]] += 1;
  }
  world.allReduceSum({sums});
  for (StageRecompute& stage : recompute) {
    const double ranks = acc[1][stage.stage];
    stage.kept_mb_per_microbatch = ranks > 0 ? acc[0][stage.stage] / ranks / kBytesPerMiB : 0;
  }
}

// The simulator's makespan of `schedule` under `costs`; where micro-batches differ in
// length (`lengths`, every step's, at most `max_length`), the median over the steps after
// the first of each step's makespan with its own lengths. The measured compute costs are
// medians over those steps, of micro-batches of every length, so a micro-batch of L tokens
// computes L over their mean length; a message was timed at max_length, so it takes L over
// that (compute and messages grow about linearly with the length; attention's L^2 part is
// small at these lengths).
double predictedMakespan(const PipelineSchedule& schedule,
                         const std::vector<std::vector<int64_t>>& lengths, int64_t max_length,
                         ActionCosts costs) {
  if (lengths.empty()) return simulateSchedule(schedule.request, schedule.ranks, costs).makespan;
  const size_t first = lengths.size() > 1 ? 1 : 0;
  double sum = 0, count = 0;
  for (size_t step = first; step < lengths.size(); ++step) {
    for (const int64_t length : lengths[step]) sum += static_cast<double>(length);
    count += static_cast<double>(lengths[step].size());
  }
  const double mean = sum / count;
  std::vector<double> makespans;
  for (size_t step = first; step < lengths.size(); ++step) {
    costs.microbatch_scale.clear();
    costs.message_scale.clear();
    for (const int64_t length : lengths[step]) {
      costs.microbatch_scale.push_back(static_cast<double>(length) / mean);
      costs.message_scale.push_back(static_cast<double>(length) / static_cast<double>(max_length));
    }
    makespans.push_back(simulateSchedule(schedule.request, schedule.ranks, costs).makespan);
  }
  return median(makespans);
}

// Note [Predicted step]
// What the step should take, from what the run measured. The simulator runs the schedule
// with every stage's own F, B, I and W costs (stages differ: a first stage whose input needs
// no gradient has an I of nothing and a W of a whole backward, the last carries the head and
// the loss; a rank with two stages measures each), and with every message between ranks
// arriving one measured transfer after its send (comm/transfer_probe.h), which gives the
// makespan of the actions. After them comes the tail: the gradient sync, the step's
// all-reduce and the optimizer. Where micro-batches differ in length, each step is simulated
// with its own lengths, and the makespan is the median of those (predictedMakespan). Every
// rank measures its own tail from the end of its actions, but a rank that ends early waits
// in the sync for the others, which the makespan already counts; the rank that ends last
// does not, so the smallest tail is the step's. Left out: the time between actions
// (posting, bookkeeping), about 1 ms a step of 48 actions on gpt-small, and the jitter of
// the actions themselves: the simulator runs every action at its median, but a rank's
// compute varies by 10% from one step to the next on this machine, and a pipeline's step
// follows the slower of its ranks at every dependency, so the measured step sits a few
// percent above the median's prediction (docs/benchmarks.md).
void addPrediction(const JobLayout& layout, const RunRecord& record,
                   const std::vector<RankMetrics>& ranks,
                   std::vector<PerCompute<double>> stage_costs, RunMetrics& m) {
  const PipelineSchedule& schedule = layout.schedule;
  const Topology& topology = layout.topology;
  const int64_t max_length = layout.sequences ? layout.sequences->maxLength() : 0;
  for (const ActionKind kind : PerCompute<double>::kinds()) {
    m.action_s[kind] = median(record.action_s[kind]);
  }
  PPSTAGE_INTERNAL_ASSERT(static_cast<int>(ranks.size()) == topology.worldSize(), ranks.size(),
                          " ranks' figures for ", topology.worldSize(), " ranks");
  double tail = ranks[0].tail_s, transfer_s = 0, transfers = 0;
  for (const RankMetrics& theirs : ranks) {
    tail = std::min(tail, theirs.tail_s);
    transfer_s += theirs.transfer_s;
    transfers += static_cast<double>(theirs.transfers);
  }
  ActionCosts measured;
  measured.per_stage = std::move(stage_costs);
  measured.comm = transfers > 0 ? transfer_s / transfers : 0;
  m.comm_s = measured.comm;
  m.stage_action_s = measured.per_stage;
  m.predicted_makespan_s =
      predictedMakespan(schedule, record.microbatch_lengths, max_length, measured);
  m.predicted_step_s = m.predicted_makespan_s + tail;
}

void printSummary(const RunMetrics& m, std::ostream& log) {
  const size_t n = m.losses.size();
  // Means over the finite losses of each window (a skipped step's loss is not finite).
  std::vector<double> finite;
  for (double loss : m.losses) {
    if (std::isfinite(loss)) finite.push_back(loss);
  }
  // Windows that do not overlap: on a short run, half of its steps each.
  const size_t window = std::min<size_t>(10, finite.size() / 2);
  double first = 0, last = 0;
  for (size_t i = 0; i < window; ++i) {
    first += finite[i] / window;
    last += finite[finite.size() - window + i] / window;
  }
  log << "\ndone: " << n << (n == 1 ? " step" : " steps") << ", loss " << std::fixed
      << std::setprecision(4);
  if (window > 0) {
    log << first << " -> " << last << " (mean of the first and last " << window << ")";
  } else {
    log << (finite.empty() ? std::nan("") : finite[0]) << " (one finite step)";
  }
  log << ", median step " << std::setprecision(3) << m.measured_step_s << " s, predicted "
      << m.predicted_step_s << " s (actions " << m.predicted_makespan_s << " + tail "
      << m.predicted_step_s - m.predicted_makespan_s << ", messages " << std::setprecision(3)
      << m.comm_s * 1e3 << " ms each), " << std::setprecision(0) << m.tokens_per_s << " "
      << m.throughput_unit << "/s" << std::defaultfloat << std::setprecision(6) << "\n"
      << "compile " << m.compile.mode << ": " << m.compile.graphs_compiled << " graphs compiled, "
      << m.compile.cache_hits << " cache hits, " << m.compile.respecializations
      << " re-specializations, " << m.compile.fusion_groups << " fusion groups, "
      << m.compile.differentiable_graphs << " differentiable graphs; first steps " << std::fixed
      << std::setprecision(3) << m.compile.compile_time_s << " s over the steady step"
      << std::defaultfloat << std::setprecision(6) << std::endl;
}

void writeMetricsJson(const RunMetrics& metrics, const std::string& path) {
  try {
    writeFileAtomically(path, metricsToJson(metrics) + "\n");
  } catch (const Error& e) {
    PPSTAGE_FAIL("cannot write --output.metrics_json '", path, "': ", e.what());
  }
}

}  // namespace

void RunRecord::add(int64_t step, int64_t steps, const StepResult& result) {
  losses.push_back(result.loss);
  accuracies.push_back(result.accuracy);
  learning_rates.push_back(result.lr);
  step_time_s.push_back(result.seconds);
  bubble_fraction.push_back(result.bubble);
  tokens.push_back(result.tokens);
  if (!result.microbatch_lengths.empty()) microbatch_lengths.push_back(result.microbatch_lengths);
  padded_tokens.push_back(result.padded_tokens);
  rss_mb.push_back(result.rss_mb);
  tensor_mb.push_back(result.tensor_mb);
  if (rss_mb.size() == 1) open_fds_start = openFileDescriptors();
  if (busy_s.empty()) busy_s.assign(result.reduced.busy_s.size(), 0.0);
  for (size_t r = 0; r < busy_s.size(); ++r) busy_s[r] += result.reduced.busy_s[r];
  const StepReduce& reduced = result.reduced;
  if (peak_allocated_mb.empty()) {
    peak_allocated_mb.assign(busy_s.size(), 0.0);
    peak_activation_mb.assign(busy_s.size(), 0.0);
  }
  for (size_t r = 0; r < busy_s.size(); ++r) {
    peak_allocated_mb[r] = std::max(peak_allocated_mb[r], reduced.peak_allocated_mb[r]);
    peak_activation_mb[r] = std::max(peak_activation_mb[r], reduced.peak_activation_mb[r]);
  }
  wall_s += result.seconds;
  receive_buffers_allocated = result.receive_buffers_allocated;
  if (step == 0 && steps > 1) return;  // the first step's costs include warm-up
  for (const ActionKind kind : PerCompute<double>::kinds()) {
    const StepReduce::KindCost& cost = result.reduced.costs[kind];
    if (cost.count > 0) action_s[kind].push_back(cost.seconds / cost.count);
    if (!std::isnan(result.action_s[kind])) my_action_s[kind].push_back(result.action_s[kind]);
  }
  my_tail_s.push_back(result.tail_s);
  my_tp_s.push_back(result.tp_s);
  my_tp_all_reduces.push_back(static_cast<double>(result.tp_all_reduces));
  my_stage_kept_bytes.resize(result.stage_kept_bytes.size(), 0.0);
  for (size_t i = 0; i < result.stage_kept_bytes.size(); ++i) {
    my_stage_kept_bytes[i] = std::max(my_stage_kept_bytes[i], result.stage_kept_bytes[i]);
  }
  my_stage_action_s.resize(result.stage_action_s.size());
  for (size_t i = 0; i < result.stage_action_s.size(); ++i) {
    for (const ActionKind kind : PerCompute<double>::kinds()) {
      const double seconds = result.stage_action_s[i][kind];
      if (!std::isnan(seconds)) my_stage_action_s[i][kind].push_back(seconds);
    }
  }
  for (const ActionKind kind : PerTransfer<double>::kinds()) {
    my_wait_s[kind].push_back(result.wait_s[kind]);
  }
}

RunMetrics summarizeRun(const Config& config, const JobLayout& layout, const RankModel& model,
                        const StepRunner& runner, const Dataset* data, const RunRecord& record,
                        Communicator& world, std::ostream& log) {
  std::vector<RankMetrics> ranks =
      gatherOwnFigures(world, ownFigures(record, *model.compile_cache, runner));
  // MpiSession gathered every rank's host name at start-up; ranks that are threads of one
  // process (no MPI) share this one's.
  const std::vector<std::string>& hosts = mpiHostNames();
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].host = hosts.size() == ranks.size() ? hosts[r] : thisHostName();
  }
  if (!config.output.params_dir.empty() && layout.topology.dpRank() == 0) {
    // Whole tensors, gathered over the tensor-parallel group, written by its first rank.
    const std::map<std::string, at::Tensor> named = namedParameters(model, runner);
    if (layout.topology.tpRank() == 0)
      writeParameterFile(config.output.params_dir, world.rank(), named);
  }
  RunMetrics metrics = runMetrics(config, layout, data, record);
  metrics.recompute = recomputePerStage(config, model.split);
  addKeptBytes(layout.topology, record, world, metrics.recompute);
  addPrediction(layout, record, ranks, stageActionCosts(layout.topology, record, world), metrics);
  addRanks(layout.topology, record, std::move(ranks), metrics);
  if (world.rank() == 0) {
    printSummary(metrics, log);
    if (!config.output.metrics_json.empty()) {
      writeMetricsJson(metrics, config.output.metrics_json);
    }
  }
  return metrics;
}

}  // namespace ppstage
