// See include/ppstage/split/model_split.h.
#include "ppstage/split/model_split.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/graph/model_failure.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/schedule/pipeline_schedule.h"

namespace ppstage {

namespace {

class Stopwatch {
 public:
  // Seconds since the last lap (or construction).
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

struct Prepared {
  ModelSplit split;
  ValueShapes shapes;
};

// Load, capture and the example run: what planning starts from.
Prepared prepare(const Config& config, Stopwatch& watch) {
  Prepared prepared{{loadModel(config.model, config.train), {}, {}, {}, {}, {}, {}}, {}};
  ModelSplit& split = prepared.split;
  ValueShapes& shapes = prepared.shapes;
  split.timings.load_s = watch.lap();
  const uint64_t seed = static_cast<uint64_t>(config.train.seed);
  split.graph = captureModel(
      split.model.module,
      makeExampleInput(split.model.input, std::min<int64_t>(config.train.batch_size, 2), seed));
  split.timings.capture_s = watch.lap();
  split.example_input = makeExampleInput(split.model.input, config.train.batch_size, seed);
  try {
    const auto make_input = [&](int64_t batch) {
      return makeExampleInput(split.model.input, batch, seed);
    };
    shapes = recordValueShapes(split.graph, make_input, config.train.batch_size);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // the interpreter's errors are not all c10::Error
    throw Error(
        detail::concat("the model fails on its example input (", dtypeName(split.model.input.dtype),
                       " ", shapeText(split.example_input.sizes().vec()),
                       ", set by --model.input_shape/--model.input_dtype): ",
                       describeModelFailure(split.graph, split.example_input, errorMessage(e))));
  }
  split.timings.shapes_s = watch.lap();
  return prepared;
}

bool balancesByTime(const PipelineConfig& pipeline) {
  return pipeline.balance == Balance::kTime && pipeline.split_points.empty();
}

// One micro-batch of the example input: what each action of the run computes on (time is
// not linear in the batch: a wide head's logits outgrow the caches).
at::Tensor microBatchInput(const Config& config, const ModelSplit& split) {
  const int stages = std::max(static_cast<int>(config.pipeline.stages), 1);
  const int64_t microbatches = scheduleOptionsFor(config.pipeline, stages, 1).microbatches;
  const int64_t batch = std::max<int64_t>(
      1, config.train.batch_size / (microbatches * std::max<int64_t>(1, config.train.dp)));
  return makeExampleInput(split.model.input, batch, static_cast<uint64_t>(config.train.seed));
}

// The run's loss against placeholder targets (class 0, or zeros): the work is the same.
UnitLoss trainingLoss(const Config& config, const ModelSplit& split) {
  const LossKind kind = resolveLossKind(config.train.loss, split.model.input.dtype);
  return [kind](const at::Tensor& output) {
    const at::Tensor target = kind == LossKind::kCrossEntropy
                                  ? at::zeros(output.sizes().slice(0, output.dim() - 1), at::kLong)
                                  : at::zeros_like(output);
    return computeLoss(kind, output, target.detach());
  };
}

UnitSeconds measureUnits(const Config& config, const Prepared& p) {
  return measureUnitSeconds(p.split.graph, findUnits(p.split.graph, p.shapes), p.shapes,
                            microBatchInput(config, p.split), trainingLoss(config, p.split));
}

}  // namespace

UnitSeconds measureUnitSeconds(const Config& config) {
  Stopwatch watch;
  return measureUnits(config, prepare(config, watch));
}

ModelSplit splitModel(const Config& config, const UnitSeconds* unit_seconds) {
  Stopwatch watch;
  Prepared prepared = prepare(config, watch);
  ModelSplit& split = prepared.split;
  const ValueShapes& shapes = prepared.shapes;
  std::optional<UnitSeconds> measured;
  if (balancesByTime(config.pipeline) && unit_seconds == nullptr) {
    measured = measureUnits(config, prepared);
    unit_seconds = &*measured;
  }
  split.plan = planStages(split.graph, shapes, config.pipeline, unit_seconds);
  split.timings.plan_s = watch.lap();
  split.stages = extractStages(split.graph, split.plan, shapes);
  split.ties = findTiedParameters(split.graph, split.stages);
  split.timings.extract_s = watch.lap();
  return std::move(prepared.split);
}

}  // namespace ppstage
