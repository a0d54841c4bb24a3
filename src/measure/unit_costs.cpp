// See include/ppstage/measure/unit_costs.h.
#include "ppstage/measure/unit_costs.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/comm/link_probe.h"
#include "ppstage/compile/compiled_stage.h"
#include "ppstage/compile/model_compiler.h"
#include "ppstage/compile/split_backward.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/statistics.h"
#include "ppstage/core/topology.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/runtime/optimizer.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/stage_module.h"

namespace ppstage {

namespace {

// Runs measured at each size (their median counts), after the warm-up ones.
constexpr int kPlanProfileRuns = 5;

// The training loss of the model's first output (the last unit computes it); empty: the
// backward starts from ones.
using UnitLoss = std::function<at::Tensor(const at::Tensor& output)>;

// The run's loss of kind `kind` against placeholder targets (class 0, or zeros: the work is
// the same).
UnitLoss trainingLoss(LossKind kind) {
  if (kind == LossKind::kModel) return [](const at::Tensor& output) { return output.sum(); };
  return [kind](const at::Tensor& output) {
    const at::Tensor target = kind == LossKind::kCrossEntropy
                                  ? at::zeros(output.sizes().slice(0, output.dim() - 1), at::kLong)
                                  : at::zeros_like(output);
    return computeLoss(kind, output, target.detach());
  };
}

// `model` cut into one stage per unit, in unit order. Throws ppstage::Error where a unit
// boundary cannot be cut (extractStages: a value that is not a tensor, and cannot be
// recomputed, would cross it).
std::vector<StageModule> unitStages(const ModelGraph& model, const std::vector<SplitUnit>& units,
                                    const ValueShapes& shapes) {
  StagePartition per_unit;
  per_unit.units = units;
  per_unit.method = "units";
  for (size_t u = 0; u < units.size(); ++u) per_unit.stages.push_back(StageRange{u, u + 1});
  try {
    return extractStages(model, per_unit, shapes);
  } catch (const Error& e) {
    throw Error(detail::concat("measuring the model's costs runs every unit on its own, and a ",
                               "unit boundary cannot be cut: ", e.what(), "; balance by params ",
                               "or flops, or give --pipeline.split_points"));
  }
}

using Clock = std::chrono::steady_clock;

// One unit's figures from one run at one micro-batch size.
struct UnitSample {
  PerCompute<double> seconds;
  double activation_bytes = 0;
  double output_bytes = 0;
  double backward_peak_bytes = 0;
  double weight_pending_bytes = 0;
};

// A unit's forward as autograd records it: its fresh input leaves, its weights, and the
// roots a backward starts from (its outputs, or the loss in the last unit) with their
// incoming gradients.
struct UnitForward {
  std::vector<at::Tensor> inputs;   // the leaves that require grad
  std::vector<at::Tensor> weights;  // parameters that require grad
  std::vector<at::Tensor> outputs;  // detached: the next unit's inputs
  std::vector<at::Tensor> roots, root_grads;
  double output_bytes = 0;
};

UnitForward runForward(const StageModule& stage, CompiledStage& compiled,
                       const std::vector<at::Tensor>& values, const UnitLoss& loss) {
  UnitForward out;
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < stage.inputs.size(); ++i) {
    inputs.push_back(values.at(i).detach());
    if (stage.inputs[i].meta.requires_grad)
      out.inputs.push_back(inputs.back().requires_grad_(true));
  }
  for (const StageParameter& p : stage.parameters) {
    if (p.value.requires_grad()) out.weights.push_back(p.value);
  }
  const std::vector<c10::IValue> results = compiled.run(stage.arguments(inputs));
  const at::Tensor loss_value = loss ? loss(results.at(0).toTensor()) : at::Tensor();
  for (const c10::IValue& v : results) {
    const at::Tensor& t = v.toTensor();
    out.outputs.push_back(t.detach());
    out.output_bytes += static_cast<double>(t.nbytes());
    if (t.requires_grad() && !loss_value.defined()) out.roots.push_back(t);
  }
  if (loss_value.defined() && loss_value.requires_grad()) out.roots.push_back(loss_value);
  return out;
}

// The gradients arriving at `f`'s roots: ones, made after its F was measured (they are
// the next unit's, not this one's).
void addRootGradients(UnitForward& f) {
  f.root_grads.clear();
  for (const at::Tensor& root : f.roots) f.root_grads.push_back(at::ones_like(root));
}

// The units behind their compiled graphs, in `config`'s compile mode.
struct CompiledUnits {
  std::unique_ptr<CompileCache> cache;
  std::vector<std::unique_ptr<CompiledStage>> stages;
};

CompiledUnits compileUnits(const Config& config, const ModelGraph& model,
                           const std::vector<StageModule>& units,
                           RecomputePolicy recompute = RecomputePolicy::kNone) {
  ModelCompiler compiler(config.compile, model, 0, recompute);
  CompiledUnits out;
  for (const StageModule& unit : units) {
    out.stages.push_back(compiler.compile(unit.graph, unit.inputs.size(), unit.node_call,
                                          "unit " + unit.modules.front()));
  }
  out.cache = compiler.takeCache();
  return out;
}

// Note [Measuring units as a stage runs them]
// A unit's backward right after its own forward finds what it saved still in the caches;
// in a run, a stage's forward of every unit comes first, and its backward reads them back
// from memory. Measured unit by unit, a gpt-small block's backward at 2 samples took 55% of
// what it takes in a run. So a measurement runs as a stage does: every unit's F in order
// (its live bytes counted around it), then every unit's B from the last; then every F
// again, every I from the last, and every W (compile/split_backward.h, as zero-bubble
// schedules run them). Each unit's backward starts from ones on its outputs (the loss in
// the last unit): the work of the gradient that would arrive. Its B (or W) also adds its
// weight gradients into a sum kept from run to run, as a run's adds each micro-batch's into
// .grad: on gpt-small that add was 3-8% of a stage's B in a run, missing from the profile
// (docs/benchmarks.md, "Across hosts").

// One forward of every unit, in order, each on the previous one's outputs; fills F and the
// bytes when `samples` is given.
std::vector<UnitForward> forwardAll(const std::vector<StageModule>& units, CompiledUnits& compiled,
                                    const std::vector<at::Tensor>& inputs, const UnitLoss& loss,
                                    std::vector<UnitSample>* samples) {
  std::vector<UnitForward> out;
  std::vector<at::Tensor> values = inputs;
  for (size_t u = 0; u < units.size(); ++u) {
    const bool last = u + 1 == units.size();
    const int64_t bytes_before = tensorBytesNow();
    const Clock::time_point start = Clock::now();
    out.push_back(runForward(units[u], *compiled.stages[u], values, last ? loss : UnitLoss()));
    if (samples != nullptr) {
      (*samples)[u].seconds[ActionKind::kForward] = secondsSince(start);
      (*samples)[u].activation_bytes = static_cast<double>(tensorBytesNow() - bytes_before);
      (*samples)[u].output_bytes = out.back().output_bytes;
    }
    values = out.back().outputs;
  }
  return out;
}

bool needsBackward(const UnitForward& f) {
  return !f.roots.empty() && !(f.inputs.empty() && f.weights.empty());
}

// Adds `grads`' last `sums.size()` entries (a unit's weight gradients) into `sums`, as a run
// adds each micro-batch's into the parameters' .grad; the first call keeps them.
void accumulateWeightGradients(const std::vector<at::Tensor>& grads,
                               std::vector<at::Tensor>& sums) {
  const size_t first = grads.size() - sums.size();
  for (size_t k = 0; k < sums.size(); ++k) {
    const at::Tensor& g = grads[first + k];
    if (!g.defined()) continue;
    if (sums[k].defined()) {
      sums[k].add_(g);
    } else {
      sums[k] = g;
    }
  }
}

// One run of Note [Measuring units as a stage runs them]. `grad_sums` holds each unit's
// weight gradients summed over the runs so far: a run's B (or W) adds its micro-batch's
// into the step's sum, and that add is part of what it costs.
std::vector<UnitSample> sampleRun(const std::vector<StageModule>& units, CompiledUnits& compiled,
                                  const std::vector<at::Tensor>& inputs, const UnitLoss& loss,
                                  std::vector<std::vector<at::Tensor>>& grad_sums) {
  std::vector<UnitSample> samples(units.size());
  std::vector<UnitForward> forwards = forwardAll(units, compiled, inputs, loss, &samples);
  for (size_t u = units.size(); u-- > 0;) {
    UnitForward& f = forwards[u];
    addRootGradients(f);
    std::vector<at::Tensor> wrt = f.inputs;
    wrt.insert(wrt.end(), f.weights.begin(), f.weights.end());
    const int64_t bytes_before = tensorBytesNow();
    resetTensorBytesPeak();
    const Clock::time_point start = Clock::now();
    if (needsBackward(f)) {
      grad_sums[u].resize(f.weights.size());
      accumulateWeightGradients(
          torch::autograd::grad(f.roots, wrt, f.root_grads, /*retain_graph=*/false,
                                /*create_graph=*/false, /*allow_unused=*/true),
          grad_sums[u]);
    }
    samples[u].seconds[ActionKind::kBackward] = secondsSince(start);
    samples[u].backward_peak_bytes = static_cast<double>(tensorBytesPeak() - bytes_before);
    f = UnitForward();
  }
  forwards = forwardAll(units, compiled, inputs, loss, nullptr);
  std::vector<SplitBackward> splits(units.size());
  std::vector<bool> split(units.size(), false);
  for (size_t u = units.size(); u-- > 0;) {
    UnitForward& f = forwards[u];
    if (!needsBackward(f)) continue;
    const int64_t bytes_before = tensorBytesNow();
    addRootGradients(f);  // what a run receives, and keeps for W where W starts from it
    const Clock::time_point start = Clock::now();
    splits[u].inputGradients(f.roots, f.root_grads, f.inputs, f.weights);
    samples[u].seconds[ActionKind::kBackwardInput] = secondsSince(start);
    split[u] = true;
    // Left for W: what I did not free of the activations, what it captured, and the
    // received gradient where W keeps it (I's input gradients, which a run sends on, are
    // gone with the call's result).
    f.roots.clear();
    f.root_grads.clear();
    samples[u].weight_pending_bytes = std::max(
        0.0, samples[u].activation_bytes + static_cast<double>(tensorBytesNow() - bytes_before));
  }
  for (size_t u = units.size(); u-- > 0;) {
    if (!split[u]) continue;
    const Clock::time_point start = Clock::now();
    accumulateWeightGradients(splits[u].weightGradients(), grad_sums[u]);
    samples[u].seconds[ActionKind::kBackwardWeight] = secondsSince(start);
  }
  return samples;
}

// Every unit's medians over `runs` runs at one micro-batch size, after `warmups` runs that
// let the profiling executors specialize.
std::vector<UnitSample> sampleUnits(const std::vector<StageModule>& units, CompiledUnits& compiled,
                                    const std::vector<at::Tensor>& inputs, const UnitLoss& loss,
                                    int warmups, int runs) {
  std::vector<std::vector<UnitSample>> samples(units.size());
  std::vector<std::vector<at::Tensor>> grad_sums(units.size());
  for (int run = 0; run < warmups + runs; ++run) {
    std::vector<UnitSample> sample = sampleRun(units, compiled, inputs, loss, grad_sums);
    if (run < warmups) continue;
    for (size_t u = 0; u < units.size(); ++u) samples[u].push_back(sample[u]);
  }
  std::vector<UnitSample> out(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<double> figures;
    const auto medianOf = [&](auto field) {
      figures.clear();
      for (const UnitSample& s : samples[u]) figures.push_back(field(s));
      return median(figures);
    };
    for (const ActionKind kind : PerCompute<double>::kinds()) {
      out[u].seconds[kind] = medianOf([kind](const UnitSample& s) { return s.seconds[kind]; });
    }
    out[u].activation_bytes = medianOf([](const UnitSample& s) { return s.activation_bytes; });
    out[u].output_bytes = medianOf([](const UnitSample& s) { return s.output_bytes; });
    out[u].backward_peak_bytes =
        medianOf([](const UnitSample& s) { return s.backward_peak_bytes; });
    out[u].weight_pending_bytes =
        medianOf([](const UnitSample& s) { return s.weight_pending_bytes; });
  }
  return out;
}

// Every unit's samples (sampleUnits) at each of `sizes`. One sample fails in some models
// (BatchNorm over a 1 x 1 map in training): the first size becomes two then.
std::vector<std::vector<UnitSample>> sampleAtSizes(const Config& config,
                                                   const CapturedModel& captured,
                                                   const std::vector<StageModule>& units,
                                                   CompiledUnits& compiled, const UnitLoss& loss,
                                                   std::vector<int64_t>& sizes) {
  const int warmups = config.compile.mode == CompileMode::kNone ? 1 : 2;
  std::vector<std::vector<UnitSample>> out;
  for (int64_t& size : sizes) {
    const auto sample = [&] {
      return sampleUnits(units, compiled, exampleInputsOf(captured, size, config.train.seed), loss,
                         warmups, kPlanProfileRuns);
    };
    try {
      out.push_back(sample());
    } catch (const c10::Error&) {
      if (size != 1 || sizes.back() <= 2) throw;
      size = 2;
      out.push_back(sample());
    }
  }
  return out;
}

// Note [Recomputation in the profile], plan/cost_profile.h: each unit's blocks, and its
// figures measured again with them recomputed, under each policy; nothing where the model
// has no blocks.
void addRecomputed(const Config& config, const CapturedModel& captured,
                   const std::vector<StageModule>& units, const UnitLoss& loss,
                   CostProfile& profile) {
  for (const RecomputePolicy policy : {RecomputePolicy::kFull, RecomputePolicy::kSelective}) {
    CompiledUnits compiled;
    std::vector<std::vector<std::string>> blocks;
    try {
      ModelCompiler compiler(config.compile, captured.graph, 0, policy);
      for (const StageModule& unit : units) {
        blocks.push_back(
            compiler.recomputedBlocks(*unit.graph, unit.inputs.size(), unit.node_call, 0));
      }
    } catch (const Error&) {
      return;  // no blocks to recompute (RecomputeChoice says why; the plan needs no reason)
    }
    compiled = compileUnits(config, captured.graph, units, policy);
    std::vector<int64_t> sizes = profile.microbatch_sizes;
    const std::vector<std::vector<UnitSample>> per_size =
        sampleAtSizes(config, captured, units, compiled, loss, sizes);
    if (sizes != profile.microbatch_sizes) continue;  // it failed where the plain units ran
    for (size_t u = 0; u < units.size(); ++u) {
      UnitCost& unit = profile.units[u];
      if (unit.blocks.empty()) unit.blocks = blocks[u];  // full's list, or selective's
      if (blocks[u].empty()) continue;
      RecomputedUnitCost& r = policy == RecomputePolicy::kFull ? unit.full : unit.selective;
      for (const std::vector<UnitSample>& samples : per_size) {
        r.seconds.push_back(samples[u].seconds);
        r.activation_bytes.push_back(samples[u].activation_bytes);
        r.backward_peak_bytes.push_back(samples[u].backward_peak_bytes);
        r.weight_pending_bytes.push_back(samples[u].weight_pending_bytes);
      }
    }
  }
}

// One optimizer step of `config`'s kind over copies of the units' trainable parameters,
// with clipping's norm and scale, per element (the median of a few, after the first, which
// makes AdamW's state).
double optimizerSecondsPerElement(const TrainConfig& train, const std::vector<StageModule>& units) {
  std::vector<at::Tensor> params;
  double elements = 0;
  for (const StageModule& unit : units) {
    for (const StageParameter& p : unit.parameters) {
      if (!p.value.requires_grad()) continue;
      at::Tensor copy = p.value.detach().to(at::kFloat).clone().requires_grad_(true);
      copy.mutable_grad() = at::randn_like(copy);
      params.push_back(copy);
      elements += static_cast<double>(copy.numel());
    }
  }
  if (params.empty()) return 0;
  std::unique_ptr<torch::optim::Optimizer> optimizer = makeOptimizer(train, params);
  constexpr int kRuns = 4;
  std::vector<double> seconds;
  for (int run = 0; run < kRuns; ++run) {
    const Clock::time_point start = Clock::now();
    at::Tensor norm = at::zeros({}, at::kFloat);
    for (const at::Tensor& p : params) norm += p.grad().pow(2).sum();
    for (const at::Tensor& p : params) p.grad().mul_(1.0);
    optimizer->step();
    if (run > 0) seconds.push_back(secondsSince(start));
  }
  return median(seconds) / elements;
}

// What is not measured here: the optimizer state's bytes per trainable element (with
// bf16's fp32 master) and the links, as the --plan options assume them.
void addStateAndLinks(const Config& config, bool bf16, CostProfile& profile) {
  const bool adamw = config.train.optimizer == OptimizerKind::kAdamW;
  profile.optimizer_state_bytes_per_element = adamw ? 8.0 : config.train.momentum > 0 ? 4.0 : 0.0;
  profile.state_bytes_per_element =
      4.0 + profile.optimizer_state_bytes_per_element + (bf16 ? 4.0 : 0.0);
  profile.link_latency_s = config.plan.link_latency_us * 1e-6;
  profile.link_bytes_per_s = config.plan.link_gbps * 1e9;
  profile.allreduce_latency_s = 2 * profile.link_latency_s;  // a 2-rank ring's 2 steps
  profile.allreduce_bytes_per_s = config.plan.allreduce_gbps * 1e9;
  profile.links = "assumed: --plan.link_latency_us, --plan.link_gbps, --plan.allreduce_gbps";
}

}  // namespace

std::vector<int64_t> measuredMicrobatchSizes(int64_t batch_size, int ranks) {
  const int64_t largest = std::max<int64_t>(batch_size / (2 * std::max(ranks, 1)), 2);
  if (batch_size < 2) return {1};
  return {1, std::min(largest, batch_size)};
}

CostProfile measureCostProfile(const Config& config, const CapturedModel& captured,
                               LossKind loss_kind, int ranks, const UnitSharding& sharding) {
  const std::vector<SplitUnit> split_units = findUnits(captured.graph, captured.shapes);
  std::vector<StageModule> units = unitStages(captured.graph, split_units, captured.shapes);
  if (sharding.shard) {
    for (StageModule& unit : units) sharding.shard(unit);
  }
  CompiledUnits compiled = compileUnits(config, captured.graph, units);
  const UnitLoss loss = trainingLoss(loss_kind);
  CostProfile profile;
  profile.model = config.model.name;
  profile.compile_mode = toString(config.compile.mode);
  const bool bf16 = captured.compute_dtype == at::kBFloat16;  // not where it fell back
  profile.precision = bf16 ? "bf16" : "fp32";
  profile.batch_size = config.train.batch_size;
  profile.tp = sharding.shard ? sharding.tp : 1;
  const at::Tensor& input = captured.example_inputs.at(0);
  if (at::isIntegralType(input.scalar_type(), /*includeBool=*/false)) {
    profile.tokens_per_sample = input.numel() / std::max<int64_t>(input.size(0), 1);
  }
  profile.microbatch_sizes = measuredMicrobatchSizes(config.train.batch_size, ranks);
  profile.units.resize(units.size());
  const std::vector<std::vector<UnitSample>> per_size =
      sampleAtSizes(config, captured, units, compiled, loss, profile.microbatch_sizes);
  for (const std::vector<UnitSample>& samples : per_size) {
    for (size_t u = 0; u < units.size(); ++u) {
      profile.units[u].seconds.push_back(samples[u].seconds);
      profile.units[u].activation_bytes.push_back(samples[u].activation_bytes);
      profile.units[u].output_bytes.push_back(samples[u].output_bytes);
      profile.units[u].backward_peak_bytes.push_back(samples[u].backward_peak_bytes);
      profile.units[u].weight_pending_bytes.push_back(samples[u].weight_pending_bytes);
    }
  }
  addRecomputed(config, captured, units, loss, profile);
  for (size_t u = 0; u < units.size(); ++u) {
    UnitCost& unit = profile.units[u];
    unit.path = split_units[u].path;
    unit.flops = split_units[u].flops;
    for (const StageParameter& p : units[u].parameters) {
      unit.param_bytes += static_cast<int64_t>(p.value.nbytes());
      if (p.value.requires_grad()) unit.trainable_elements += p.value.numel();
    }
  }
  for (const TiedParameter& tied : findTiedParameters(captured.graph, units)) {
    const StageParameter& first =
        units.at(static_cast<size_t>(tied.copies.front().stage))
            .parameters.at(static_cast<size_t>(tied.copies.front().parameter));
    if (!first.value.requires_grad()) continue;  // nothing to sum
    CostProfile::Tie tie;
    for (const TiedParameter::Copy& copy : tied.copies) {
      tie.units.push_back(static_cast<size_t>(copy.stage));
    }
    tie.gradient_bytes = 4 * first.value.numel();  // fp32
    profile.ties.push_back(std::move(tie));
  }
  profile.optimizer_s_per_element = optimizerSecondsPerElement(config.train, units);
  addStateAndLinks(config, bf16, profile);
  return profile;
}

}  // namespace ppstage

namespace ppstage {

CostProfile measureCostProfileOnRanks(const std::function<CostProfile()>& measure,
                                      Communicator* world, const std::vector<int>& host_of_rank,
                                      const std::vector<std::string>& host_names,
                                      const std::vector<int>& turns) {
  if (world == nullptr || world->size() < 2) return measure();
  const bool hosts_known = static_cast<int>(host_of_rank.size()) == world->size();
  const LinkCosts links = measureLinks(*world, hosts_known ? host_of_rank : std::vector<int>{});
  PPSTAGE_INTERNAL_ASSERT(turns.empty() || static_cast<int>(turns.size()) == world->size(),
                          "measuring turns of ", turns.size(), " ranks for ", world->size());
  const int my_turn = turns.empty() ? 0 : turns[static_cast<size_t>(world->rank())];
  const int turn_count = turns.empty() ? 1 : *std::max_element(turns.begin(), turns.end()) + 1;
  std::string mine;
  runAgreed(*world, [&] {
    // Every rank passes every turn's barrier, its own measurement failed or not (the
    // others would wait for it); a rank waiting for its turn sleeps after its first 100 ms
    // (MpiCommunicator's barrier), leaving the cores to those measuring.
    std::exception_ptr failure;
    for (int turn = 0; turn < turn_count; ++turn) {
      if (turn == my_turn && !failure) {
        try {
          mine = costProfileToJson(measure());
        } catch (...) {
          failure = std::current_exception();
        }
      }
      if (turn_count > 1) world->barrier();
    }
    if (failure) std::rethrow_exception(failure);
  });
  std::vector<CostProfile> profiles;
  for (const std::string& text : allGatherStrings(*world, mine)) {
    profiles.push_back(readCostProfile(text, "a rank's"));
  }
  CostProfile profile = averageProfiles(profiles);
  profile.link_latency_s = links.message.latency_s;
  profile.link_bytes_per_s = links.message.bytes_per_s;
  profile.allreduce_latency_s = links.all_reduce.latency_s;
  profile.allreduce_bytes_per_s = links.all_reduce.bytes_per_s;
  profile.host_link_latency_s = links.host_message.latency_s;
  profile.host_link_bytes_per_s = links.host_message.bytes_per_s;
  profile.host_allreduce_latency_s = links.host_all_reduce.latency_s;
  profile.host_allreduce_bytes_per_s = links.host_all_reduce.bytes_per_s;
  profile.step_reduce_s = links.step_reduce_s;
  profile.step_reduce_ranks = world->size();
  const auto nameOf = [&](int rank, int host) {
    return static_cast<int>(host_names.size()) == world->size()
               ? host_names[static_cast<size_t>(rank)]
               : std::to_string(host);
  };
  for (const ProbedPair& pair : links.pairs) {
    profile.probed_links.push_back({pair.first_rank, pair.second_rank,
                                    nameOf(pair.first_rank, pair.first_host),
                                    nameOf(pair.second_rank, pair.second_host),
                                    pair.message.latency_s, pair.message.bytes_per_s});
  }
  const int hosts = hosts_known ? hostCountOf(host_of_rank) : 1;
  profile.links = "measured over " + std::to_string(world->size()) + " ranks" +
                  (hosts > 1 ? " on " + std::to_string(hosts) + " hosts" : "");
  return profile;
}

}  // namespace ppstage
