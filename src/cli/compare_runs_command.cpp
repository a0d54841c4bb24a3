// `ppstage compare-runs`: are two training runs numerically the same? The reference is
// usually one process with one stage and no micro-batching; the candidate a pipelined run
// of the same model, data, seed and steps.
#include "commands.h"

#include <ATen/ATen.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "ppstage/config/options.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/observe/loss_comparison.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/observe/parameter_files.h"

namespace ppstage::cli {
namespace {

struct Comparison {
  size_t steps = 0;
  double loss_diff = 0;  // the largest relative difference of a step's loss
  size_t worst_step = 0;
  bool with_params = false;  // both runs wrote their parameters
  size_t params_compared = 0;
  double param_diff = 0;  // the largest relative difference of a parameter tensor
  std::string worst_param;
  std::vector<std::pair<double, std::string>> param_diffs;  // per tensor
};

RunMetrics readMetrics(const std::string& path) {
  return metricsFromJson(readFile(path, "metrics file"), path);
}

// max(|a - b| - atol, 0) / max(max |b|, tiny) over the elements: one figure per tensor, 0
// when equal. Equal elements count 0 even when infinite (a causal mask's -inf), and the
// scale is taken over finite elements.
double relativeDiff(const at::Tensor& a, const at::Tensor& b, double atol) {
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  const at::Tensor finite = y.abs().masked_fill(~y.isfinite(), 0);
  const double scale = std::max(finite.numel() > 0 ? finite.max().item<double>() : 0.0, 1e-12);
  const at::Tensor diff = (x - y).abs().masked_fill(x == y, 0);
  if (diff.numel() == 0) return 0;
  return (diff - atol).clamp_min(0).max().item<double>() / scale;
}

void compareRunLosses(const RunMetrics& ref, const RunMetrics& run, Comparison& c) {
  const LossDifference d =
      ppstage::compareLosses(ref.losses, ref.first_step, run.losses, run.first_step);
  c.steps = d.steps;
  c.loss_diff = d.max_rel_diff;
  c.worst_step = static_cast<size_t>(d.worst_step);
}

// Every final parameter, by model path; both runs must hold the same ones.
void compareParameters(const std::string& ref_dir, const std::string& run_dir, double atol,
                       Comparison& c) {
  const auto ref_params = readParameterFiles(ref_dir);
  const auto run_params = readParameterFiles(run_dir);
  for (const auto& [path, expected] : ref_params) {
    const auto it = run_params.find(path);
    PPSTAGE_CHECK(it != run_params.end(), "parameter '", path, "' of ", ref_dir,
                  " is missing from ", run_dir);
    PPSTAGE_CHECK(it->second.sizes() == expected.sizes(), "parameter '", path, "' has shape ",
                  it->second.sizes(), " in ", run_dir, " but ", expected.sizes(), " in ", ref_dir);
    const double d = relativeDiff(it->second, expected, atol);
    c.param_diffs.emplace_back(d, path);
    if (d > c.param_diff || !std::isfinite(d)) {
      c.param_diff = d;
      c.worst_param = path;
    }
    ++c.params_compared;
  }
  PPSTAGE_CHECK(run_params.size() == ref_params.size(), run_dir, " has ", run_params.size(),
                " parameters, ", ref_dir, " has ", ref_params.size());
}

void printJson(const Comparison& c, double rtol, bool same) {
  const nlohmann::json out = {{"steps", c.steps},
                              {"loss_max_rel_diff", c.loss_diff},
                              {"worst_step", c.worst_step + 1},
                              {"params_compared", c.params_compared},
                              {"param_max_rel_diff", c.param_diff},
                              {"worst_param", c.worst_param},
                              {"rtol", rtol},
                              {"within_tolerance", same}};
  std::cout << out.dump(2) << std::endl;
}

// "3 stages", "1 stage"; "4 micro-batches".
std::string counted(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

void describeRun(const char* role, const std::string& path, const RunMetrics& m) {
  std::cout << role << " " << path << " (" << m.schedule << ", "
            << counted(m.stages, "stage", "stages") << ", pp " << m.pp << " x dp " << m.dp
            << " x tp " << m.tp << ", " << counted(m.microbatches, "micro-batch", "micro-batches")
            << ", compile " << m.compile.mode << ", " << m.precision << ")\n";
}

void printText(const Comparison& c, double rtol, bool same, int top) {
  std::cout << std::scientific << std::setprecision(2) << "losses      " << c.steps
            << " steps, max rel diff " << c.loss_diff << " (step " << c.worst_step + 1 << ")\n";
  if (c.with_params) {
    std::cout << "parameters  " << counted(c.params_compared, "tensor", "tensors")
              << ", max rel diff " << c.param_diff
              << (c.worst_param.empty() ? "" : " (" + c.worst_param + ")") << "\n";
    std::vector<std::pair<double, std::string>> worst_first = c.param_diffs;
    std::sort(worst_first.rbegin(), worst_first.rend());
    for (size_t i = 0; i < worst_first.size() && i < static_cast<size_t>(top); ++i) {
      std::cout << "  " << worst_first[i].first << "  " << worst_first[i].second << "\n";
    }
  } else {
    std::cout << "parameters  not compared (a run has no params_dir, or the runs end at "
                 "different steps)\n";
  }
  std::cout << (same ? "same within" : "DIFFERENT beyond") << " rtol " << rtol << std::endl;
}

// The one line on stderr that says what differs most.
void printDifference(const Comparison& c, double rtol) {
  const bool loss = c.loss_diff > rtol;
  std::cerr << "ppstage: runs differ: " << (loss ? "loss" : "parameters") << " max rel diff "
            << (loss ? c.loss_diff : c.param_diff) << " > rtol " << rtol << " at "
            << (loss ? "step " + std::to_string(c.worst_step + 1) : c.worst_param) << std::endl;
}

}  // namespace

int compareRunsMain(int argc, const char* const* argv) {
  std::string reference_path, candidate_path;
  double rtol = 1e-5;
  double atol = 0;
  bool json = false;
  int top = 3;
  po::options_description options("Comparison");
  auto add = options.add_options();
  add("reference", po::value(&reference_path)->required(),
      "metrics JSON of the reference run (ppstage train --output.metrics_json)");
  add("candidate", po::value(&candidate_path)->required(), "metrics JSON of the run to check");
  add("rtol", po::value(&rtol)->default_value(rtol, shortestText(rtol)),
      "largest relative difference allowed: per step's loss, and per parameter tensor "
      "(max (|a - b| - atol) / max |reference| over finite elements; equal elements, also "
      "infinite ones, differ by 0)");
  add("atol", po::value(&atol)->default_value(atol, shortestText(atol)),
      "parameters: absolute differences up to this are ignored (for tensors whose gradient "
      "is mathematically zero, where float noise has no scale to be relative to)");
  add("top", po::value(&top)->default_value(top),
      "list the N parameters that differ most (text output)");
  add("json", po::bool_switch(&json), "print the comparison as JSON");
  const char* usage =
      "usage: ppstage compare-runs --reference REF.json --candidate RUN.json [--rtol R] "
      "[--atol A] [--json]\n\n"
      "Compares the per-step losses of two runs (the steps both ran: a run resumed from a\n"
      "checkpoint is compared from its first step on) and, when both wrote --output.params_dir,\n"
      "every final parameter by its model path. Exits 0 when all are within --rtol, 1 when\n"
      "not (naming the worst step or parameter).";
  if (!parseOptions(argc, argv, options, usage, std::cout)) return 0;
  PPSTAGE_CHECK(rtol >= 0, "--rtol must not be negative; got ", rtol);
  PPSTAGE_CHECK(atol >= 0, "--atol must not be negative; got ", atol);

  const RunMetrics ref = readMetrics(reference_path);
  const RunMetrics run = readMetrics(candidate_path);
  Comparison c;
  compareRunLosses(ref, run, c);
  // Final parameters only of runs that end at the same step.
  c.with_params = !ref.params_dir.empty() && !run.params_dir.empty() &&
                  ref.first_step + ref.losses.size() == run.first_step + run.losses.size();
  if (c.with_params) compareParameters(ref.params_dir, run.params_dir, atol, c);
  const bool same = c.loss_diff <= rtol && c.param_diff <= rtol;
  if (json) {
    printJson(c, rtol, same);
  } else {
    describeRun("reference", reference_path, ref);
    describeRun("candidate", candidate_path, run);
    printText(c, rtol, same, top);
  }
  if (same) return 0;
  printDifference(c, rtol);
  return 1;
}

}  // namespace ppstage::cli
