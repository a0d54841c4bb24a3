// `ppstage compare-runs`: are two training runs numerically the same? The reference is
// usually one process with one stage and no micro-batching; the candidate a pipelined run
// of the same model, data, seed and steps.
#include <ATen/ATen.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "ppstage/config/options.h"
#include "ppstage/core/error.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/observe/parameter_files.h"

namespace ppstage::cli {
namespace {

RunMetrics readMetrics(const std::string& path) {
  std::ifstream file(path);
  PPSTAGE_CHECK(file.good(), "cannot read metrics file '", path, "'");
  std::ostringstream text;
  text << file.rdbuf();
  return metricsFromJson(text.str(), path);
}

// max |a - b| / max(max |b|, tiny): one figure per tensor, 0 when equal.
double relativeDiff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  const double scale = std::max(y.abs().max().item<double>(), 1e-12);
  return (x - y).abs().max().item<double>() / scale;
}

}  // namespace

int compareRunsMain(int argc, const char* const* argv) {
  std::string reference_path, candidate_path;
  double rtol = 1e-5;
  bool json = false;
  int top = 3;
  po::options_description options("Comparison");
  auto add = options.add_options();
  add("reference", po::value(&reference_path)->required(),
      "metrics JSON of the reference run (ppstage train --output.metrics_json)");
  add("candidate", po::value(&candidate_path)->required(), "metrics JSON of the run to check");
  add("rtol", po::value(&rtol)->default_value(rtol),
      "largest relative difference allowed: per step's loss, and per parameter tensor "
      "(max |a - b| / max |reference|)");
  add("top", po::value(&top)->default_value(top),
      "list the N parameters that differ most (text output)");
  add("json", po::bool_switch(&json), "print the comparison as JSON");
  const char* usage =
      "usage: ppstage compare-runs --reference REF.json --candidate RUN.json [--rtol R] "
      "[--json]\n\n"
      "Compares the per-step losses of two runs and, when both wrote --output.params_dir,\n"
      "every final parameter by its model path. Exits 0 when all are within --rtol, 1 when\n"
      "not (naming the worst step or parameter).";
  if (!parseOptions(argc, argv, options, usage, std::cout)) return 0;
  PPSTAGE_CHECK(rtol >= 0, "--rtol must not be negative; got ", rtol);

  const RunMetrics ref = readMetrics(reference_path);
  const RunMetrics run = readMetrics(candidate_path);
  PPSTAGE_CHECK(ref.losses.size() == run.losses.size(), reference_path, " has ", ref.losses.size(),
                " steps but ", candidate_path, " has ", run.losses.size());

  double loss_diff = 0;
  size_t worst_step = 0;
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    const double d =
        std::abs(run.losses[i] - ref.losses[i]) / std::max(std::abs(ref.losses[i]), 1e-12);
    if (d > loss_diff || !std::isfinite(d)) {
      loss_diff = d;
      worst_step = i;
    }
  }

  double param_diff = 0;
  std::string worst_param;
  std::vector<std::pair<double, std::string>> param_diffs;
  size_t compared = 0;
  const bool with_params = !ref.params_dir.empty() && !run.params_dir.empty();
  if (with_params) {
    const auto ref_params = readParameterFiles(ref.params_dir);
    const auto run_params = readParameterFiles(run.params_dir);
    for (const auto& [path, expected] : ref_params) {
      const auto it = run_params.find(path);
      PPSTAGE_CHECK(it != run_params.end(), "parameter '", path, "' of ", ref.params_dir,
                    " is missing from ", run.params_dir);
      PPSTAGE_CHECK(it->second.sizes() == expected.sizes(), "parameter '", path, "' has shape ",
                    it->second.sizes(), " in ", run.params_dir, " but ", expected.sizes(), " in ",
                    ref.params_dir);
      const double d = relativeDiff(it->second, expected);
      param_diffs.emplace_back(d, path);
      if (d > param_diff || !std::isfinite(d)) {
        param_diff = d;
        worst_param = path;
      }
      ++compared;
    }
    PPSTAGE_CHECK(run_params.size() == ref_params.size(), run.params_dir, " has ",
                  run_params.size(), " parameters, ", ref.params_dir, " has ", ref_params.size());
  }
  const bool same = loss_diff <= rtol && param_diff <= rtol;

  if (json) {
    nlohmann::json out = {{"steps", ref.losses.size()},
                          {"loss_max_rel_diff", loss_diff},
                          {"worst_step", worst_step + 1},
                          {"params_compared", compared},
                          {"param_max_rel_diff", param_diff},
                          {"worst_param", worst_param},
                          {"rtol", rtol},
                          {"within_tolerance", same}};
    std::cout << out.dump(2) << std::endl;
  } else {
    std::cout << "reference " << reference_path << " (" << ref.schedule << ", " << ref.stages
              << " stages, pp " << ref.pp << " x dp " << ref.dp << ", " << ref.microbatches
              << " micro-batches, compile " << ref.compile_mode << ")\n"
              << "candidate " << candidate_path << " (" << run.schedule << ", " << run.stages
              << " stages, pp " << run.pp << " x dp " << run.dp << ", " << run.microbatches
              << " micro-batches, compile " << run.compile_mode << ")\n"
              << std::scientific << std::setprecision(2) << "losses      " << ref.losses.size()
              << " steps, max rel diff " << loss_diff << " (step " << worst_step + 1 << ")\n";
    if (with_params) {
      std::cout << "parameters  " << compared << " tensors, max rel diff " << param_diff << " ("
                << worst_param << ")\n";
      std::sort(param_diffs.rbegin(), param_diffs.rend());
      for (size_t i = 0; i < param_diffs.size() && i < static_cast<size_t>(top); ++i) {
        std::cout << "  " << param_diffs[i].first << "  " << param_diffs[i].second << "\n";
      }
    } else {
      std::cout << "parameters  not compared (a run has no params_dir)\n";
    }
    std::cout << (same ? "same within" : "DIFFERENT beyond") << " rtol " << rtol << std::endl;
  }
  if (!same) {
    std::cerr << "ppstage: runs differ: " << (loss_diff > rtol ? "loss" : "parameters")
              << " max rel diff " << (loss_diff > rtol ? loss_diff : param_diff) << " > rtol "
              << rtol << " at "
              << (loss_diff > rtol ? "step " + std::to_string(worst_step + 1) : worst_param)
              << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace ppstage::cli
