// See include/ppstage/train/trainer.h.
#include "ppstage/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <ostream>
#include <thread>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/comm/topology.h"
#include "ppstage/data/dataset.h"
#include "ppstage/observe/parameter_files.h"
#include "ppstage/runtime/executor.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/plan_report.h"
#include "ppstage/train/gradient_sync.h"
#include "ppstage/train/optimizer.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// How the job's ranks and the global batch are divided.
struct Layout {
  int world = 1;
  int pp = 1;
  int dp = 1;
  int stages = 1;
  int stages_per_rank = 1;
  int microbatches = 1;
  int64_t local_batch = 1;      // samples per replica and step
  int64_t microbatch_size = 1;  // samples per micro-batch
  Placement placement = Placement::kLoop;
};

Layout resolveLayout(const Config& c, int world) {
  Layout l;
  l.world = world;
  l.dp = static_cast<int>(c.train.dp);
  PPSTAGE_CHECK(world % l.dp == 0, "the world size must be pipeline ranks x --train.dp: ", world,
                " ranks cannot form ", l.dp, " data-parallel replicas");
  l.pp = world / l.dp;
  const int split_stages = static_cast<int>(c.pipeline.split_points.size()) + 1;
  l.stages = c.pipeline.stages > 0 ? static_cast<int>(c.pipeline.stages)
             : !c.pipeline.split_points.empty()
                 ? split_stages
                 : l.pp * static_cast<int>(c.pipeline.stages_per_rank);
  PPSTAGE_CHECK(l.stages % l.pp == 0, l.stages, " stages cannot be spread evenly over ", l.pp,
                " pipeline ranks (", world, " ranks / --train.dp ", l.dp, "): the number of ",
                "stages must be a multiple of the pipeline ranks");
  l.stages_per_rank = l.stages / l.pp;
  PPSTAGE_CHECK(c.pipeline.stages_per_rank == 1 || c.pipeline.stages_per_rank == l.stages_per_rank,
                "--pipeline.stages_per_rank is ", c.pipeline.stages_per_rank, " but ", l.stages,
                " stages on ", l.pp, " pipeline ranks make ", l.stages_per_rank, " per rank");
  l.microbatches =
      c.pipeline.microbatches > 0 ? static_cast<int>(c.pipeline.microbatches) : 2 * l.stages;
  const int64_t parts = static_cast<int64_t>(l.dp) * l.microbatches;
  PPSTAGE_CHECK(c.train.batch_size % parts == 0, "--train.batch_size ", c.train.batch_size,
                " is not divisible by --train.dp ", l.dp, " x --pipeline.microbatches ",
                l.microbatches, " (", parts, "): every micro-batch must have the same size");
  l.local_batch = c.train.batch_size / l.dp;
  l.microbatch_size = l.local_batch / l.microbatches;
  l.placement = c.pipeline.placement == "v" ? Placement::kV : Placement::kLoop;
  return l;
}

int autoThreads(int world) {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = local != nullptr ? std::max(1, std::atoi(local)) : world;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / ranks_here);
}

// One sample of the model's first output, from the plan's shapes: (B, ...) -> (...), or
// rows of logits (B*T, V) -> (T, V).
SampleShape outputSample(const BoundaryTensor& output, int64_t batch) {
  const TensorMeta& meta = output.meta;
  SampleShape sample{meta.dtype, {}, 0};
  if (meta.sizes.empty()) return sample;
  const bool batch_first =
      meta.sizes[0] == batch && !meta.per_sample.empty() && meta.per_sample[0] == 1;
  if (batch_first) {
    sample.shape.assign(meta.sizes.begin() + 1, meta.sizes.end());
  } else {
    const int64_t last = meta.sizes.back();
    sample.shape = {meta.numel() / std::max<int64_t>(1, batch * last), last};
  }
  return sample;
}

void printConfiguration(std::ostream& log, const Config& c, const Layout& l,
                        const PipelineSchedule& schedule, const Dataset* data, LossKind loss,
                        int threads) {
  log << "ppstage train: " << l.world << " rank" << (l.world > 1 ? "s" : "") << " = pp " << l.pp
      << " x dp " << l.dp << ", " << l.stages << " stage" << (l.stages > 1 ? "s" : "") << " ("
      << l.stages_per_rank << " per rank, " << toString(l.placement) << " placement), " << threads
      << " thread" << (threads > 1 ? "s" : "") << " per rank\n"
      << "  model     " << c.model.name << " (layers " << c.model.layers << ", d_model "
      << c.model.d_model << ", seq_len " << c.model.seq_len << ", vocab " << c.model.vocab_size
      << ", tied " << (c.model.tie_embeddings ? "yes" : "no") << ")\n"
      << "  schedule  " << schedule.name << ", " << l.microbatches << " micro-batches of "
      << l.microbatch_size << " (batch " << c.train.batch_size << "), simulated bubble "
      << std::fixed << std::setprecision(3) << schedule.simulation.bubble_fraction << "\n"
      << std::defaultfloat << std::setprecision(6) << "  compile   " << c.compile.mode << "\n"
      << "  train     " << c.train.steps << " steps, " << c.train.optimizer << " lr " << c.train.lr
      << " weight_decay " << c.train.weight_decay << ", grad_clip " << c.train.grad_clip
      << ", loss " << toString(loss) << ", seed " << c.train.seed << "\n"
      << "  data      " << (data ? data->describe() : "?") << "\n\n";
}

// Every model path of this rank's stages -> its tensor.
std::map<std::string, at::Tensor> namedParameters(const std::vector<StageModule*>& stages) {
  std::map<std::string, at::Tensor> named;
  for (StageModule* stage : stages) {
    for (const StageParameter& p : stage->parameters) {
      named[p.name] = p.value;
      for (const std::string& alias : p.aliases) named[alias] = p.value;
    }
  }
  return named;
}

std::vector<at::Tensor> slice(const Dataset& data, const std::vector<int64_t>& indices,
                              int64_t begin, const Layout& l, bool targets) {
  std::vector<at::Tensor> out;
  for (int m = 0; m < l.microbatches; ++m) {
    const auto first = indices.begin() + begin + m * l.microbatch_size;
    const std::vector<int64_t> part(first, first + l.microbatch_size);
    out.push_back(targets ? stackTargets(data, part) : stackInputs(data, part));
  }
  return out;
}

// The per-step numbers every rank contributes to one all-reduce.
struct StepReduce {
  // kCosts: seconds and count of F, B, I, W; kGraphs, kRespecializations: the compile
  // cache's counts so far; kBusy: one slot per rank.
  enum : int64_t {
    kLoss = 0,
    kNormSquared = 1,
    kCosts = 2,
    kGraphs = 10,
    kRespecializations = 11,
    kBusy = 12
  };
  static at::Tensor make(int world) { return at::zeros({kBusy + world}, at::kDouble); }
};

}  // namespace

RunMetrics train(const Config& config, Communicator& world, std::ostream& log) {
  const bool leader = world.rank() == 0;
  Layout layout;
  std::optional<Topology> topology;
  PipelineSchedule schedule;
  ModelSplit split;
  std::unique_ptr<Dataset> data;
  LossKind loss_kind = LossKind::kCrossEntropy;
  std::vector<LocalStage> local_stages;
  std::unique_ptr<CompileCache> compile_cache;
  std::vector<StageModule*> my_stages;
  int threads = 1;
  int64_t tokens_per_step = 0;

  // Setup: local work only, agreed on by every rank before any other collective.
  runAgreed(world, [&] {
    layout = resolveLayout(config, world.size());
    topology = Topology::create(layout.world, world.rank(), layout.pp, layout.dp, layout.stages,
                                layout.placement);
    threads = config.train.threads > 0 ? static_cast<int>(config.train.threads)
                                       : autoThreads(layout.world);
    at::set_num_threads(threads);

    ScheduleOptions options;
    options.schedule = config.pipeline.schedule;
    options.stages = layout.stages;
    options.microbatches = layout.microbatches;
    options.stages_per_rank = layout.stages_per_rank;
    options.placement = layout.placement;
    schedule = buildSchedule(makeScheduleRegistry(config.pipeline.schedule_plugin), options);
    PPSTAGE_CHECK(static_cast<int>(schedule.ranks.size()) == layout.pp, "schedule '", schedule.name,
                  "' has ", schedule.ranks.size(), " ranks; the job has ", layout.pp,
                  " pipeline ranks");

    Config split_config = config;
    split_config.pipeline.stages = layout.stages;
    split = splitModel(split_config);
    loss_kind = resolveLossKind(config.train.loss, split.model.input.dtype);

    DataRequest request;
    request.input.dtype = split.model.input.dtype;
    request.input.shape.assign(split.model.input.shape.begin() + 1, split.model.input.shape.end());
    request.input.token_bound = split.model.input.token_bound;
    request.output = outputSample(split.stages.back().outputs.at(0), config.train.batch_size);
    request.loss = loss_kind;
    request.seed = config.train.seed;
    tokens_per_step = config.train.batch_size;
    if (at::isIntegralType(request.input.dtype, false)) {
      for (int64_t d : request.input.shape) tokens_per_step *= d;
    }
    // The ranks at both ends read the data; rank 0 opens it too, to describe it.
    if (topology->owns(0) || topology->owns(layout.stages - 1) || leader) {
      data = openDataset(config.data, request);
    }

    const CompileMode mode = parseCompileMode(config.compile.mode);
    setShapeStrategy(config.compile.dynamic);
    compile_cache = std::make_unique<CompileCache>(
        mode, world.rank(), config.compile.max_respecializations, config.compile.dynamic);
    std::vector<bool> blocks;
    if (mode == CompileMode::kBlock) blocks = findBlocks(split.graph, config.compile.block_pattern);
    for (int s : topology->myStages()) {
      StageModule& module = split.stages[static_cast<size_t>(s)];
      LocalStage stage;
      stage.module = &module;
      stage.compiled = std::make_unique<CompiledStage>(
          module.graph, *compile_cache, "stage " + std::to_string(s),
          mode == CompileMode::kBlock ? segmentStage(module, split.graph, blocks)
                                      : std::vector<GraphSegment>{});
      stage.input_spec = boundarySpecOf(module, true, config.train.batch_size);
      if (s + 1 < layout.stages) {
        stage.output_spec = boundarySpecOf(module, false, config.train.batch_size);
      }
      local_stages.push_back(std::move(stage));
      my_stages.push_back(&module);
    }
    // Other ranks' stages: drop their parameter copies.
    for (StageModule& module : split.stages) {
      if (!topology->owns(module.index)) {
        for (StageParameter& p : module.parameters) p.value = at::Tensor();
      }
    }
  });

  if (leader) {
    printConfiguration(log, config, layout, schedule, data.get(), loss_kind, threads);
    printPlanTable(log, split);
    log << std::endl;
  }

  // Collectives from here on; a failure ends the job (the CLI aborts every rank).
  for (const LocalStage& stage : local_stages) {
    const int s = stage.module->index;
    if (s > 0 && !topology->owns(s - 1)) {
      exchangeBoundarySpec(world, topology->prevRank(s), stage.input_spec, false);
    }
    if (s + 1 < layout.stages && !topology->owns(s + 1)) {
      exchangeBoundarySpec(world, topology->nextRank(s), stage.output_spec, true);
    }
  }
  GradientSync sync(world, *topology, my_stages, split.ties);
  const std::vector<at::Tensor> params = sync.parameters();
  std::unique_ptr<torch::optim::Optimizer> optimizer = makeOptimizer(config.train, params);

  ExecutorOptions options;
  options.microbatch_size = layout.microbatch_size;
  options.loss = loss_kind;
  options.loss_scale = 1.0 / (static_cast<double>(layout.microbatches) * layout.dp);
  const ActionList actions = schedule.ranks.at(static_cast<size_t>(topology->ppRank()));
  Executor executor(world, *topology, std::move(local_stages), actions, options);

  const SampleOrder order(data ? data->size() : 0, config.train.seed);
  const bool reads_inputs = topology->owns(0);
  const bool reads_targets = topology->owns(layout.stages - 1);
  const int64_t replica_begin = topology->dpRank() * layout.local_batch;

  RunMetrics metrics;
  std::vector<double> busy_total(static_cast<size_t>(layout.world), 0.0);
  // Mean seconds of F, B, I, W actions in each step after the first (the first includes
  // warm-up: allocation, profiling runs); medians over steps resist the machine's spikes.
  std::array<std::vector<double>, 4> costs;
  double wall_total = 0;
  std::vector<double> rss_samples;
  for (int64_t step = 0; step < config.train.steps; ++step) {
    std::vector<at::Tensor> inputs, targets;
    if (reads_inputs || reads_targets) {
      const std::vector<int64_t> indices = order.batch(step, config.train.batch_size);
      if (reads_inputs) inputs = slice(*data, indices, replica_begin, layout, false);
      if (reads_targets) targets = slice(*data, indices, replica_begin, layout, true);
    }
    const auto start = Clock::now();
    const StepStats stats = executor.runStep(inputs, targets);
    sync.synchronize();

    at::Tensor reduce = StepReduce::make(layout.world);
    double* r = reduce.data_ptr<double>();
    r[StepReduce::kLoss] = stats.loss_sum;
    r[StepReduce::kNormSquared] = sync.squaredNormShare();
    for (int k = 0; k < 4; ++k) {
      r[StepReduce::kCosts + 2 * k] = stats.compute_s[static_cast<size_t>(k)];
      r[StepReduce::kCosts + 2 * k + 1] =
          static_cast<double>(stats.compute_count[static_cast<size_t>(k)]);
    }
    r[StepReduce::kGraphs] = static_cast<double>(compile_cache->stats().graphs_compiled);
    r[StepReduce::kRespecializations] =
        static_cast<double>(compile_cache->stats().respecializations);
    r[StepReduce::kBusy + world.rank()] = stats.busy_s();
    world.allReduceSum({reduce});

    const double norm = std::sqrt(r[StepReduce::kNormSquared]);
    const double coefficient = clipCoefficient(norm, config.train.grad_clip);
    if (coefficient < 1) sync.scale(coefficient);
    stepAndClear(*optimizer, params);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    rss_samples.push_back(currentRssMb());

    double idle = 0;
    for (int rank = 0; rank < layout.world; ++rank) {
      const double busy = r[StepReduce::kBusy + rank];
      busy_total[static_cast<size_t>(rank)] += busy;
      idle += std::max(0.0, seconds - busy);
    }
    wall_total += seconds;
    if (step > 0 || config.train.steps == 1) {
      for (int k = 0; k < 4; ++k) {
        const double n = r[StepReduce::kCosts + 2 * k + 1];
        if (n > 0) costs[static_cast<size_t>(k)].push_back(r[StepReduce::kCosts + 2 * k] / n);
      }
    }
    const double loss = r[StepReduce::kLoss];
    const double bubble = idle / (layout.world * seconds);
    metrics.losses.push_back(loss);
    metrics.step_time_s.push_back(seconds);
    metrics.bubble_fraction.push_back(bubble);
    const bool last = step + 1 == config.train.steps;
    if (leader && config.output.log_every > 0 &&
        ((step + 1) % config.output.log_every == 0 || last || step == 0)) {
      log << "step " << std::setw(4) << step + 1 << "/" << config.train.steps << "  loss "
          << std::fixed << std::setprecision(4) << loss << "  time " << std::setprecision(3)
          << seconds << " s  tokens/s " << std::setprecision(0)
          << static_cast<double>(tokens_per_step) / seconds << "  bubble " << std::setprecision(3)
          << bubble << "  grad_norm " << std::setprecision(3) << norm;
      if (compile_cache->mode() != CompileMode::kNone) {  // over all ranks, so far
        log << "  graphs " << std::setprecision(0) << r[StepReduce::kGraphs] << "  respec "
            << r[StepReduce::kRespecializations];
      }
      log << std::defaultfloat << std::setprecision(6) << std::endl;
    }
  }

  // Per-rank summary: one more all-reduce of kPerRank numbers per rank (peak and sampled
  // RSS, its growth, and the compile cache's counts).
  constexpr int kPerRank = 8;
  compile_cache->countOptimizedGraphs();
  at::Tensor summary = at::zeros({layout.world * kPerRank}, at::kDouble);
  {
    double* mine = summary.data_ptr<double>() + world.rank() * kPerRank;
    const CompileStats& stats = compile_cache->stats();
    mine[0] = peakRssMb();
    mine[1] = static_cast<double>(stats.graphs_compiled);
    mine[2] = static_cast<double>(stats.cache_hits);
    mine[3] = static_cast<double>(stats.respecializations);
    mine[4] = *std::max_element(rss_samples.begin(), rss_samples.end());
    mine[5] = growthPer100Steps(rss_samples);
    mine[6] = static_cast<double>(stats.fusion_groups);
    mine[7] = static_cast<double>(stats.differentiable_graphs);
  }
  world.allReduceSum({summary});

  if (!config.output.params_dir.empty() && topology->dpRank() == 0) {
    writeParameterFile(config.output.params_dir, world.rank(), namedParameters(my_stages));
  }

  metrics.model = config.model.name;
  metrics.schedule = schedule.name;
  metrics.compile_mode = config.compile.mode;
  metrics.compile.mode = config.compile.mode;
  metrics.compile.compile_time_s = warmupOverhead(metrics.step_time_s);
  metrics.data = data ? data->describe() : "";
  metrics.stages = layout.stages;
  metrics.pp = layout.pp;
  metrics.dp = layout.dp;
  metrics.microbatches = layout.microbatches;
  metrics.batch_size = config.train.batch_size;
  metrics.tokens_per_step = tokens_per_step;
  metrics.params_dir = config.output.params_dir;
  metrics.final_loss = metrics.losses.back();
  metrics.measured_step_s = median(metrics.step_time_s);
  std::vector<double> throughput;
  for (double s : metrics.step_time_s)
    throughput.push_back(static_cast<double>(tokens_per_step) / s);
  metrics.tokens_per_s = median(throughput);
  metrics.forward_s = median(costs[0]);
  metrics.backward_s = median(costs[1]);
  metrics.input_grad_s = median(costs[2]);
  metrics.weight_grad_s = median(costs[3]);
  ActionCosts measured;
  measured.forward = metrics.forward_s;
  measured.backward = metrics.backward_s;
  measured.input_grad = metrics.input_grad_s;
  measured.weight_grad = metrics.weight_grad_s;
  measured.comm = 0;
  metrics.predicted_makespan_s =
      simulateSchedule(schedule.request, schedule.ranks, measured).makespan;
  for (int rank = 0; rank < layout.world; ++rank) {
    RankMetrics rm;
    rm.rank = rank;
    const Topology other =
        Topology::create(layout.world, rank, layout.pp, layout.dp, layout.stages, layout.placement);
    rm.stages = other.myStages();
    rm.busy_s = busy_total[static_cast<size_t>(rank)];
    rm.idle_s = std::max(0.0, wall_total - rm.busy_s);
    const double* theirs = summary.data_ptr<double>() + rank * kPerRank;
    rm.peak_rss_mb = theirs[0];
    rm.graphs_compiled = static_cast<long long>(theirs[1]);
    rm.cache_hits = static_cast<long long>(theirs[2]);
    rm.respecializations = static_cast<long long>(theirs[3]);
    rm.max_step_rss_mb = theirs[4];
    rm.rss_growth_mb_per_100_steps = theirs[5];
    metrics.compile.graphs_compiled += rm.graphs_compiled;
    metrics.compile.cache_hits += rm.cache_hits;
    metrics.compile.respecializations += rm.respecializations;
    metrics.compile.fusion_groups += static_cast<long long>(theirs[6]);
    metrics.compile.differentiable_graphs += static_cast<long long>(theirs[7]);
    metrics.ranks.push_back(rm);
  }

  if (leader) {
    const size_t n = metrics.losses.size();
    const size_t window = std::min<size_t>(10, n);
    double first = 0, last = 0;
    for (size_t i = 0; i < window; ++i) {
      first += metrics.losses[i] / window;
      last += metrics.losses[n - window + i] / window;
    }
    log << "\ndone: " << n << " steps, loss " << std::fixed << std::setprecision(4) << first
        << " -> " << last << " (mean of the first and last " << window << "), median step "
        << std::setprecision(3) << metrics.measured_step_s << " s, predicted "
        << metrics.predicted_makespan_s << " s, " << std::setprecision(0) << metrics.tokens_per_s
        << " tokens/s" << std::defaultfloat << std::setprecision(6) << "\n"
        << "compile " << metrics.compile.mode << ": " << metrics.compile.graphs_compiled
        << " graphs compiled, " << metrics.compile.cache_hits << " cache hits, "
        << metrics.compile.respecializations << " re-specializations, "
        << metrics.compile.fusion_groups << " fusion groups, "
        << metrics.compile.differentiable_graphs << " differentiable graphs; first steps "
        << std::fixed << std::setprecision(3) << metrics.compile.compile_time_s
        << " s over the steady step" << std::defaultfloat << std::setprecision(6) << std::endl;
    if (!config.output.metrics_json.empty()) {
      std::ofstream file(config.output.metrics_json);
      file << metricsToJson(metrics) << "\n";
      PPSTAGE_CHECK(file.good(), "cannot write --output.metrics_json '", config.output.metrics_json,
                    "'");
    }
  }
  return metrics;
}

}  // namespace ppstage
