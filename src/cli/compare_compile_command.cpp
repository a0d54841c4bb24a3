// `ppstage compare-compile`: the same training in each compile mode (same model, data,
// seed and steps), side by side: compile cost, steady step time, memory and its growth,
// and the losses against mode `none`.
#include "commands.h"

#include <ATen/ATen.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "mpi_job.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/compile/compiled_stage.h"
#include "ppstage/config/options.h"
#include "ppstage/core/allocator.h"
#include "ppstage/core/error.h"
#include "ppstage/observe/loss_comparison.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/train/trainer.h"
#include "run_command.h"

namespace ppstage::cli {
namespace {

struct ModeRow {
  CompileMode mode = CompileMode::kNone;
  RunMetrics metrics;
  double step_time_s = 0;        // steadyStepTime: the median after the warm-up steps
  double peak_rss_mb = 0;        // the largest of the ranks' peaks during this mode's run
  double rss_growth = 0;         // MB per 100 steps after warm-up, the largest of the ranks
  size_t growth_steps = 0;       // the steps after the warm-up it is measured over
  double peak_allocated_mb = 0;  // tensor memory (observe/tensor_memory.h), the largest rank's
  double peak_activation_mb = 0;
  LossDifference loss;  // against none (the first mode when none is not listed)
  // With --train.recompute: the same mode's run without recomputation, and the seconds a
  // step spent in reruns on the rank that spent the most.
  double plain_step_time_s = 0;
  double plain_peak_activation_mb = 0;
  double recompute_s_per_step = 0;
  // Per stage: what one micro-batch kept (StageRecompute::kept_mb_per_microbatch), without
  // and with recomputation.
  std::vector<double> plain_kept_mb;
  std::vector<double> kept_mb;
};

std::vector<double> keptPerStage(const RunMetrics& metrics) {
  std::vector<double> kept;
  for (const StageRecompute& stage : metrics.recompute)
    kept.push_back(stage.kept_mb_per_microbatch);
  return kept;
}

// What recomputation cost in `row`'s mode: `plain` is the same run without it.
void addRecomputeCost(ModeRow& row, const ModeRow& plain) {
  row.plain_step_time_s = plain.step_time_s;
  row.plain_peak_activation_mb = plain.peak_activation_mb;
  row.plain_kept_mb = keptPerStage(plain.metrics);
  row.kept_mb = keptPerStage(row.metrics);
  const double steps = static_cast<double>(std::max<size_t>(1, row.metrics.losses.size()));
  for (const RankMetrics& r : row.metrics.ranks) {
    row.recompute_s_per_step = std::max(row.recompute_s_per_step, r.recompute_s / steps);
  }
}

// Recomputation's cost per mode: the step and the activations against the same mode
// without it, and the seconds of reruns a step.
void printRecomputeTable(const std::vector<ModeRow>& rows, RecomputePolicy policy) {
  std::cout << "\nrecompute " << toString(policy)
            << ": mode, step s without and with, ratio; activations MB without and with, "
               "reduction; reruns s per step (the busiest rank); MB one micro-batch keeps on "
               "stage 0, without and with\n";
  for (const ModeRow& r : rows) {
    std::cout << std::left << std::setw(7) << toString(r.mode) << std::right << std::fixed
              << std::setprecision(4) << std::setw(9) << r.plain_step_time_s << std::setw(9)
              << r.step_time_s << std::setprecision(3) << std::setw(7)
              << r.step_time_s / std::max(r.plain_step_time_s, 1e-12) << std::setprecision(1)
              << std::setw(10) << r.plain_peak_activation_mb << std::setw(9) << r.peak_activation_mb
              << std::setprecision(2) << std::setw(7)
              << r.plain_peak_activation_mb / std::max(r.peak_activation_mb, 1e-12) << "x"
              << std::setprecision(4) << std::setw(9) << r.recompute_s_per_step
              << std::setprecision(2) << std::setw(9)
              << (r.plain_kept_mb.empty() ? 0.0 : r.plain_kept_mb.front()) << std::setw(9)
              << (r.kept_mb.empty() ? 0.0 : r.kept_mb.front()) << std::defaultfloat << "\n";
  }
}

// `peak_reset`: the ranks' peak resident sizes started over when this mode began; where
// they could not, the largest size sampled after a step stands in (it misses peaks
// inside a step).
ModeRow summarize(CompileMode mode, RunMetrics metrics, bool peak_reset) {
  ModeRow row;
  row.mode = mode;
  row.metrics = std::move(metrics);
  row.step_time_s = steadyStepTime(row.metrics.step_time_s);
  row.growth_steps = growthSteps(row.metrics.step_time_s.size());
  for (const RankMetrics& r : row.metrics.ranks) {
    row.peak_rss_mb = std::max(row.peak_rss_mb, peak_reset ? r.peak_rss_mb : r.max_step_rss_mb);
    row.rss_growth = std::max(row.rss_growth, r.rss_growth_mb_per_100_steps);
    row.peak_allocated_mb = std::max(row.peak_allocated_mb, r.peak_allocated_mb);
    row.peak_activation_mb = std::max(row.peak_activation_mb, r.peak_activation_mb);
  }
  return row;
}

bool growthMeasured(const ModeRow& row) { return row.growth_steps >= kMinGrowthSteps; }

// RSS growth, or why there is none: too few steps to fit a line to.
std::string growthText(const ModeRow& row) {
  if (!growthMeasured(row)) return "n/a";
  std::ostringstream text;
  text << std::fixed << std::setprecision(2) << row.rss_growth;
  return text.str();
}

void printTable(const std::vector<ModeRow>& rows, CompileMode reference) {
  std::cout << "\nmode   compile s  graphs  hits  respec  per graph  step s    peak RSS MB  "
               "tensors MB  "
               "activations MB  RSS MB/100 steps  loss rel diff vs "
            << toString(reference) << "\n";
  for (const ModeRow& r : rows) {
    std::cout << std::left << std::setw(7) << toString(r.mode) << std::right << std::fixed
              << std::setprecision(3) << std::setw(9) << r.metrics.compile.compile_time_s
              << std::setw(8) << r.metrics.compile.graphs_compiled << std::setw(6)
              << r.metrics.compile.cache_hits << std::setw(8) << r.metrics.compile.respecializations
              << std::setw(11) << r.metrics.compile.specializations_per_graph << std::setw(8)
              << std::setprecision(4) << r.step_time_s << std::setw(13) << std::setprecision(1)
              << r.peak_rss_mb << std::setw(12) << r.peak_allocated_mb << std::setw(16)
              << r.peak_activation_mb << std::setw(18) << growthText(r) << "  " << std::scientific
              << std::setprecision(2) << r.loss.max_rel_diff << std::defaultfloat << "\n";
  }
  if (!rows.empty() && !growthMeasured(rows.front())) {
    std::cout << "RSS growth is fitted over at least " << kMinGrowthSteps
              << " steps after the warm-up; these runs had " << rows.front().growth_steps
              << " (--train.steps " << rows.front().metrics.step_time_s.size() << ")\n";
  }
}

// Where compiled modes kept more activation memory than none (by more than 5%), by how
// much and why: autodiff of whole graphs.
void printActivationNote(const std::vector<ModeRow>& rows,
                         std::vector<ModeRow>::const_iterator none) {
  if (none == rows.end() || none->peak_activation_mb <= 0) return;
  std::ostringstream held;
  held << std::fixed;
  for (const ModeRow& r : rows) {
    const double ratio = r.peak_activation_mb / none->peak_activation_mb;
    if (r.mode == CompileMode::kNone || ratio <= 1.05) continue;
    held << (held.tellp() > 0 ? ", " : "") << toString(r.mode) << " " << std::setprecision(2)
         << ratio << "x (" << std::setprecision(1) << r.peak_activation_mb << " MB)";
  }
  if (held.tellp() <= 0) return;
  std::cout << std::fixed << std::setprecision(1) << "activations: " << held.str()
            << " of none's peak (" << none->peak_activation_mb
            << " MB): a compiled graph is differentiated ahead of time (TorchScript's symbolic "
               "autodiff), and its forward returns, as extra outputs kept until the backward, "
               "every intermediate its backward formulas read, where eager autograd keeps per "
               "op only what that op's backward needs\n"
            << std::defaultfloat << std::setprecision(6);
}

// Which mode to use: the fastest steady step, and against none what it gains a step and
// after how many steps that repays its compiling; then why no mode fused anything where none
// did on the CPU.
void printAdvice(const std::vector<ModeRow>& rows) {
  const auto fastest = std::min_element(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.step_time_s < b.step_time_s;
  });
  const auto none = std::find_if(rows.begin(), rows.end(),
                                 [](const ModeRow& r) { return r.mode == CompileMode::kNone; });
  if (fastest == rows.end()) return;
  std::cout << std::fixed << std::setprecision(4) << "fastest: " << toString(fastest->mode) << ", "
            << fastest->step_time_s << " s a step";
  if (none != rows.end() && fastest != none && fastest->step_time_s < none->step_time_s) {
    const double gain = none->step_time_s - fastest->step_time_s;
    std::cout << std::setprecision(2) << ", " << none->step_time_s / fastest->step_time_s
              << "x none's; its compiling (" << fastest->metrics.compile.compile_time_s
              << " s over the first steps) is repaid after "
              << static_cast<int64_t>(
                     std::ceil(std::max(0.0, fastest->metrics.compile.compile_time_s) / gain))
              << " steps: use --compile.mode " << toString(fastest->mode)
              << " for runs longer than that";
  } else if (none != rows.end()) {
    std::cout << ": compiling gains nothing on this model here; keep --compile.mode none";
  }
  std::cout << std::defaultfloat << std::setprecision(6) << "\n";
  const bool compiled = std::any_of(rows.begin(), rows.end(),
                                    [](const ModeRow& r) { return r.mode != CompileMode::kNone; });
  const bool fused = std::any_of(rows.begin(), rows.end(), [](const ModeRow& r) {
    return r.metrics.compile.fusion_groups > 0;
  });
  printActivationNote(rows, none);
  if (compiled && !fused && !fusesOnCpu()) {
    std::cout << "0 fusion groups: LibTorch does not fuse kernels on the CPU "
                 "(torch::jit::canFuseOnCPU() is false; the wheel has no LLVM), so stage and "
                 "block change the executor here (shape specialization, autodiff of whole "
                 "graphs), not the kernels; on a GPU the TensorExpr fuser fuses elementwise "
                 "ops\n";
  }
}

std::string rowsJson(const std::vector<ModeRow>& rows) {
  nlohmann::json modes = nlohmann::json::array();
  for (const ModeRow& r : rows) {
    modes.push_back({{"mode", toString(r.mode)},
                     {"compile_time_s", r.metrics.compile.compile_time_s},
                     {"graphs_compiled", r.metrics.compile.graphs_compiled},
                     {"cache_hits", r.metrics.compile.cache_hits},
                     {"respecializations", r.metrics.compile.respecializations},
                     {"specializations_per_graph", r.metrics.compile.specializations_per_graph},
                     {"fusion_groups", r.metrics.compile.fusion_groups},
                     {"differentiable_graphs", r.metrics.compile.differentiable_graphs},
                     {"step_time_s", r.step_time_s},
                     {"peak_rss_mb", r.peak_rss_mb},
                     {"peak_allocated_mb", r.peak_allocated_mb},
                     {"peak_activation_mb", r.peak_activation_mb},
                     {"rss_growth_mb_per_100_steps",
                      growthMeasured(r) ? nlohmann::json(r.rss_growth) : nlohmann::json()},
                     {"rss_growth_steps", r.growth_steps},
                     {"loss_max_rel_diff", r.loss.max_rel_diff},
                     {"final_loss", r.metrics.final_loss}});
    if (r.plain_step_time_s > 0) {
      modes.back()["recompute"] = {{"step_time_s_without", r.plain_step_time_s},
                                   {"peak_activation_mb_without", r.plain_peak_activation_mb},
                                   {"recompute_s_per_step", r.recompute_s_per_step},
                                   {"kept_mb_per_microbatch_without", r.plain_kept_mb},
                                   {"kept_mb_per_microbatch", r.kept_mb}};
    }
  }
  return nlohmann::json{{"modes", modes}}.dump(2);
}

// Whatever the order listed, `stage` runs last: optimizing a whole stage graph leaves the
// heap fragmented (hundreds of MB resident at 32 GPT layers, mostly free but not
// returnable), which a mode run after it would start from.
std::vector<size_t> runOrder(const std::vector<CompileMode>& modes) {
  std::vector<size_t> order(modes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_partition(order.begin(), order.end(),
                        [&](size_t i) { return modes[i] != CompileMode::kStage; });
  return order;
}

// `config`'s training in compile mode `mode` (collective). Before it, what the previous
// mode freed goes back to the OS, as far as the heap allows, and the peak starts over: the
// memory figures are this mode's.
ModeRow runMode(const Config& config, CompileMode mode, Communicator& world, bool announce) {
  Config run = config;
  run.compile.mode = mode;
  run.output.log_every = 0;
  run.output.metrics_json.clear();
  run.output.trace.clear();
  run.output.params_dir.clear();
  if (announce) std::cout << "compile mode " << toString(mode) << ": " << std::flush;
  releaseFreedMemory();
  at::Tensor ranks_reset = at::full({1}, resetPeakRss() ? 1.0 : 0.0, at::kDouble);
  world.allReduceSum({ranks_reset});
  std::ostringstream log;
  ModeRow row = summarize(mode, train(run, world, log), ranks_reset.item<double>() == world.size());
  if (announce) {
    std::cout << row.metrics.losses.size() << " steps, final loss " << row.metrics.final_loss
              << std::endl;
  }
  return row;
}

// `config`'s training once per mode (collective), stage last (runOrder); with
// --train.recompute, each mode again without it (addRecomputeCost).
std::vector<ModeRow> runModes(const Config& config, const std::vector<CompileMode>& modes,
                              Communicator& world, bool announce) {
  std::vector<ModeRow> rows(modes.size());
  Config plain = config;
  plain.train.recompute = RecomputePolicy::kNone;
  plain.train.recompute_blocks.clear();
  for (const size_t index : runOrder(modes)) {
    rows[index] = runMode(config, modes[index], world, announce);
    if (config.train.recompute != RecomputePolicy::kNone) {
      addRecomputeCost(rows[index], runMode(plain, modes[index], world, announce));
    }
  }
  return rows;
}

// Every row's largest relative loss difference against none (the first mode when none is
// not listed); returns the mode compared against.
CompileMode compareLosses(std::vector<ModeRow>& rows) {
  const auto none = std::find_if(rows.begin(), rows.end(),
                                 [](const ModeRow& r) { return r.mode == CompileMode::kNone; });
  const ModeRow& reference_row = none != rows.end() ? *none : rows.front();
  for (ModeRow& r : rows) {
    r.loss = ppstage::compareLosses(reference_row.metrics.losses, 0, r.metrics.losses, 0);
  }
  return reference_row.mode;
}

// A mode whose loss went NaN or infinite where the reference's did not has no numerics
// to report: the command fails, naming the mode and the step.
void checkLossesFinite(const std::vector<ModeRow>& rows, CompileMode reference) {
  const ModeRow& ref = *std::find_if(rows.begin(), rows.end(),
                                     [&](const ModeRow& r) { return r.mode == reference; });
  for (const ModeRow& r : rows) {
    if (std::isfinite(r.loss.max_rel_diff)) continue;
    const size_t step = static_cast<size_t>(r.loss.worst_step);
    throw Error(detail::concat("compile mode ", toString(r.mode), "'s loss at step ", step + 1,
                               " is ", r.metrics.losses.at(step), " where ", toString(reference),
                               "'s is ", ref.metrics.losses.at(step)));
  }
}

const char* const kUsage =
    "usage: [mpirun -np P] ppstage compare-compile [--config FILE] [options] "
    "[--compile.modes none,stage,block] [--train.steps N] [--json]\n\n"
    "Runs the same training (model, data, seed, steps, layout) once per compile mode and\n"
    "prints, per mode: compile time (the first 3 steps over as many steady steps), graphs\n"
    "compiled and cache hits (over all ranks), the median steady step, the peak resident\n"
    "memory and its growth per 100 steps after warm-up (a leak shows here; n/a when too\n"
    "few steps ran to measure it), and the largest relative loss difference against none\n"
    "(a loss that went NaN in one mode only fails the command). Between modes the process\n"
    "hands its free memory back and starts its peak over; stage runs last, as the heap it\n"
    "leaves behind cannot all be handed back. With --train.recompute, each mode also runs\n"
    "without recomputation, and a second table gives recomputation's cost in each mode: the\n"
    "step and the peak activations against that run, and the seconds of reruns a step.";

}  // namespace

int compareCompileMain(int argc, const char* const* argv) {
  Config config;
  std::string modes_text = "none,stage,block";
  bool json = false;
  po::options_description options;
  addAllOptions(options, config);
  po::options_description comparison("Comparison");
  auto add = comparison.add_options();
  add("compile.modes", po::value(&modes_text)->default_value(modes_text),
      "the compile modes to compare, in the order shown (stage runs last); losses are "
      "compared against none (against the first mode when none is not listed)");
  add("json", po::bool_switch(&json),
      "print {\"modes\": [{mode, compile_time_s, graphs_compiled, cache_hits, "
      "respecializations, specializations_per_graph (the most executors one graph got: one per "
      "input shape, or one with --compile.dynamic), fusion_groups, differentiable_graphs, "
      "step_time_s, peak_rss_mb, "
      "peak_allocated_mb, peak_activation_mb, "
      "rss_growth_mb_per_100_steps (null when too few steps ran to measure it), "
      "rss_growth_steps (the steps after the warm-up it is fitted over), loss_max_rel_diff, "
      "final_loss, and with --train.recompute, recompute: {step_time_s_without, "
      "peak_activation_mb_without, recompute_s_per_step, kept_mb_per_microbatch_without, "
      "kept_mb_per_microbatch (per stage)}}]}");
  options.add(comparison);

  installCountingAllocator();
  MpiSession mpi;
  std::vector<CompileMode> modes;
  MpiCommandStart start;
  start.argc = argc;
  start.argv = argv;
  start.options = &options;
  start.usage = kUsage;
  start.validate = [&] {
    PPSTAGE_CHECK(config.checkpoint.dir.empty(), "compare-compile runs the same training ",
                  "once per mode; it takes no --checkpoint.dir");
    for (const std::string& mode : splitList(modes_text)) {
      modes.push_back(parseChoice<CompileMode>(mode));
    }
    PPSTAGE_CHECK(!modes.empty(), "--compile.modes must list at least one mode");
  };
  start.quiet = [&] { return json; };
  const std::unique_ptr<Communicator> world = startTrainingCommand(start, config);
  if (!world) return 0;
  const bool leader = world->rank() == 0;
  return runCommand([&] {
    std::vector<ModeRow> rows = runModes(config, modes, *world, leader && !json);
    const bool recomputes = config.train.recompute != RecomputePolicy::kNone;
    const CompileMode reference = compareLosses(rows);
    if (leader && json) std::cout << rowsJson(rows) << std::endl;
    if (leader && !json) {
      printTable(rows, reference);
      if (recomputes) printRecomputeTable(rows, config.train.recompute);
      printAdvice(rows);
    }
    checkLossesFinite(rows, reference);
    return 0;
  });
}

}  // namespace ppstage::cli
