// See include/ppstage/split/model_split.h.
#include "ppstage/split/model_split.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/model_failure.h"
#include "ppstage/graph/value_shapes.h"

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

}  // namespace

CapturedModel captureForSplit(const Config& config, const InputSpec* data_input, bool training) {
  Stopwatch watch;
  CapturedModel captured{loadModel(config.model, config.train), {}, {}, {}, {0}, {}};
  InputSpec& input = captured.model.input;
  if (data_input != nullptr && !data_input->names.empty()) {
    const InputBinding binding =
        bindInputs(captured.model.module, data_input->names, config.model.inputs);
    input = boundInputSpec(*data_input, binding);
    captured.input_fields = binding.fields;
  } else if (data_input != nullptr) {
    input = *data_input;
  }
  if (!training) captured.model.module.eval();
  captured.timings.load_s = watch.lap();
  const uint64_t seed = static_cast<uint64_t>(config.train.seed);
  try {
    captured.graph =
        captureModel(captured.model.module, input.names,
                     makeExampleInputs(input, std::min<int64_t>(config.train.batch_size, 2), seed));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("the model fails on an example input", 0) != 0) throw;
    throw Error(what + " (the example input is set by " + input.source + ")");
  }
  captured.timings.capture_s = watch.lap();
  captured.example_inputs = makeExampleInputs(input, config.train.batch_size, seed);
  try {
    const auto make_input = [&](int64_t batch) { return makeExampleInputs(input, batch, seed); };
    captured.shapes = recordValueShapes(captured.graph, make_input, config.train.batch_size);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // the interpreter's errors are not all c10::Error
    throw Error(detail::concat(
        "the model fails on its example input (",
        inputsText(captured.graph.input_names, captured.example_inputs), ", set by ", input.source,
        "): ", describeModelFailure(captured.graph, captured.example_inputs, errorMessage(e))));
  }
  captured.timings.shapes_s = watch.lap();
  return captured;
}

bool balancesByTime(const PipelineConfig& pipeline) {
  return pipeline.balance == Balance::kTime && pipeline.split_points.empty();
}

ModelSplit splitCaptured(CapturedModel captured, const PipelineConfig& pipeline,
                         const UnitTimes* unit_times) {
  PPSTAGE_INTERNAL_ASSERT(!balancesByTime(pipeline) || unit_times != nullptr,
                          "balance by time needs the units' measured seconds");
  Stopwatch watch;
  ModelSplit split;
  split.plan = planStages(captured.graph, captured.shapes, pipeline, unit_times);
  split.timings = captured.timings;
  split.timings.plan_s = watch.lap();
  split.stages = extractStages(captured.graph, split.plan, captured.shapes);
  split.ties = findTiedParameters(captured.graph, split.stages);
  split.timings.extract_s = watch.lap();
  split.model = std::move(captured.model);
  split.graph = std::move(captured.graph);
  split.example_inputs = std::move(captured.example_inputs);
  split.input_fields = std::move(captured.input_fields);
  return split;
}

ModelSplit splitModel(const Config& config, const UnitTimes* unit_times,
                      const InputSpec* data_input) {
  return splitCaptured(captureForSplit(config, data_input), config.pipeline, unit_times);
}

}  // namespace ppstage
