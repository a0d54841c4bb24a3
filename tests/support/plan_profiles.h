// Cost profiles written by hand for the planner's tests (plan/cost_profile.h), and the
// config file train reads back (what `plan --write-config` writes).
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ppstage/config/options.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/planner.h"

namespace ppstage::test {

// A profile of no units yet, measured at 1 and 4 samples in fp32, `state_bytes` per
// trainable element beside it (its optimizer's state `optimizer_state_bytes` of them), and
// links of 5 us and 5 GB/s (all-reduces 1 GB/s).
inline CostProfile emptyProfile(const std::string& model, int64_t batch,
                                double optimizer_s_per_element, double state_bytes,
                                double optimizer_state_bytes) {
  CostProfile p;
  p.model = model;
  p.compile_mode = "none";
  p.precision = "fp32";
  p.batch_size = batch;
  p.microbatch_sizes = {1, 4};
  p.optimizer_s_per_element = optimizer_s_per_element;
  p.state_bytes_per_element = state_bytes;
  p.optimizer_state_bytes_per_element = optimizer_state_bytes;
  p.link_latency_s = 5e-6;
  p.link_bytes_per_s = 5e9;
  p.allreduce_latency_s = 5e-6;
  p.allreduce_bytes_per_s = 1e9;
  return p;
}

// What a unit keeps of one sample, and its backward's peak above that.
struct SampleBytes {
  double kept = 0;
  double backward_peak = 0;
};

// Unit "layers.<u>", a block of its own, measured at 1 and 4 samples: per sample F 1 ms, B
// 2 ms (I and W 1 ms each), `plain` bytes, all its kept bytes waiting for W; with its block
// recomputed in full, `full` bytes, B and I 1 ms longer (the rerun), W as before.
inline UnitCost blockUnit(int u, int64_t param_bytes, int64_t trainable_elements, SampleBytes plain,
                          SampleBytes full) {
  UnitCost unit;
  unit.path = "layers." + std::to_string(u);
  unit.blocks = {unit.path};
  unit.param_bytes = param_bytes;
  unit.trainable_elements = trainable_elements;
  for (double size : {1.0, 4.0}) {
    const double f = 1e-3 * size;
    unit.seconds.push_back({f, 2 * f, f, f});
    unit.activation_bytes.push_back(plain.kept * size);
    unit.output_bytes.push_back(4096 * size);
    unit.backward_peak_bytes.push_back(plain.backward_peak * size);
    unit.weight_pending_bytes.push_back(plain.kept * size);
    unit.full.seconds.push_back({f, 3 * f, 2 * f, f});
    unit.full.activation_bytes.push_back(full.kept * size);
    unit.full.backward_peak_bytes.push_back(full.backward_peak * size);
    unit.full.weight_pending_bytes.push_back(plain.kept * size);
  }
  return unit;
}

// 1F1B at dp x pp (one stage a rank), `microbatches` of `microbatch_size` samples, cut
// before the units `starts`.
inline PlanCandidate oneFOneB(int dp, int pp, int microbatches, int64_t microbatch_size,
                              std::vector<size_t> starts) {
  PlanCandidate c;
  c.schedule = "1f1b";
  c.dp = dp;
  c.pp = pp;
  c.microbatches = microbatches;
  c.microbatch_size = microbatch_size;
  c.stage_starts = std::move(starts);
  return c;
}

// The configuration `train --config <path>` reads.
inline Config readConfigFile(const std::string& path) {
  Config read;
  boost::program_options::options_description options;
  addAllOptions(options, read);
  const std::string arg = "--config=" + path;
  const char* argv[] = {"train", arg.c_str()};
  std::ostringstream out;
  if (!parseOptions(2, argv, options, "", out)) throw std::runtime_error(out.str());
  return read;
}

}  // namespace ppstage::test
