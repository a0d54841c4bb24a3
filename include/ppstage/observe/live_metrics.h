// What a run reports while it goes, beside its step line: a record per step and per
// evaluation, each written out at once, so that a user can watch a long run: JSON lines
// (--output.metrics_jsonl) and TensorBoard event files (--output.tensorboard). The metrics
// JSON (metrics.h) comes only at the end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage {

struct LiveStep {
  int64_t step = 0;  // 1-based: the steps done
  double loss = 0;
  double accuracy = 0;  // NaN unless the run classifies
  double lr = 0;
  double grad_norm = 0;
  double seconds = 0;
  double rate = 0;         // tokens (or samples) per second
  bool token_rate = true;  // rate counts tokens, not samples
  double bubble = 0;
  double epoch = 0;    // NaN for endless (synthetic) data
  bool finite = true;  // false: the optimizer did not step
};

struct LiveEval {
  int64_t step = 0;  // the steps done when it ran
  double loss = 0;
  double accuracy = 0;  // NaN unless the run classifies
  double seconds = 0;
};

// One place the records go.
class LiveMetricsSink {
 public:
  virtual ~LiveMetricsSink() = default;
  virtual void step(const LiveStep& s) = 0;
  virtual void eval(const LiveEval& e) = 0;
};

// The sinks `output` asks for (none: empty). `resumed`: the run continues a checkpoint,
// so its JSON lines go after the earlier run's rather than over them. Throws
// ppstage::Error when one cannot be opened.
std::vector<std::unique_ptr<LiveMetricsSink>> openLiveMetrics(const OutputConfig& output,
                                                              bool resumed);

// The JSON line of a step: {"kind": "step", "step": 3, "loss": ..., "lr": ...,
// "grad_norm": ..., "seconds": ..., "tokens_per_s" (or "samples_per_s"): ..., "bubble":
// ..., "finite": true, "time": <unix seconds>}, with "accuracy" and "epoch" where they
// apply; and of an evaluation: {"kind": "eval", "step", "loss", "seconds", "time"} and
// "accuracy".
std::string liveStepJson(const LiveStep& s, double unix_time);
std::string liveEvalJson(const LiveEval& e, double unix_time);

}  // namespace ppstage
