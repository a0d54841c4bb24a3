// The splitter end to end: model source -> capture -> plan -> extract, as `ppstage split`
// and the runtime use it.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/models/model_source.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/split/stage_partition.h"

namespace ppstage {

// Wall time of each step of splitModel(), in seconds.
struct SplitTimings {
  double load_s = 0;     // build the built-in model or load the file
  double capture_s = 0;  // inline, lift, simplify
  double shapes_s = 0;   // run the example input once
  double plan_s = 0;     // units and balance
  double extract_s = 0;  // stage graphs and parameter copies
};

// What planning starts from: the model loaded, its graph captured, and every value's shape
// recorded on the example input.
struct CapturedModel {
  LoadedModel model;
  // The model's forward inlined once (graph/capture.h): `graph` is specialized from it, and
  // so is the eval-mode graph (evalCaptureOf).
  std::shared_ptr<const InlinedForward> forward;
  ModelGraph graph;
  ValueShapes shapes;
  // One per model input (graph.input_names), (train.batch_size, ...): what `shapes` are for.
  std::vector<at::Tensor> example_inputs;
  // Per model input, its index among the data file's fields on offer (InputBinding::fields);
  // {0} without a data file.
  std::vector<size_t> input_fields{0};
  // What the stages compute in (--train.precision): kFloat, or kBFloat16 when the model
  // was captured in bf16 (its floating tensors and example inputs cast). `master_values`:
  // then, for a training capture, the fp32 values of its trainable parameters by path,
  // taken before the cast (buffers stay bf16). `precision_fallback`: why bf16 was asked for and
  // fp32 is used ("" otherwise).
  at::ScalarType compute_dtype = at::kFloat;
  std::map<std::string, at::Tensor> master_values;
  std::string precision_fallback;
  // With lengths that vary (--data.seq_len_policy bucket or variable): the model's first
  // output at a token changes when tokens follow it (bidirectional attention without a
  // mask), so the padding after a document changes its outputs.
  bool sees_later_tokens = false;
  SplitTimings timings;  // load, capture and shapes
};

struct ModelSplit {
  LoadedModel model;
  std::shared_ptr<const InlinedForward> forward;  // see CapturedModel
  ModelGraph graph;
  std::vector<at::Tensor> example_inputs;     // what the plan's shapes are for (CapturedModel)
  std::vector<size_t> input_fields{0};        // see CapturedModel
  at::ScalarType compute_dtype = at::kFloat;  // see CapturedModel
  std::map<std::string, at::Tensor> master_values;  // see CapturedModel
  std::string precision_fallback;                   // see CapturedModel
  bool sees_later_tokens = false;                   // see CapturedModel
  StagePartition partition;
  std::vector<StageModule> stages;
  std::vector<TiedParameter> ties;
  SplitTimings timings;
  // The loaded module's code, kept by releaseLoadedTensors when the module goes: stage
  // graphs' inlined call stacks point at its functions (an error inside a stage names them).
  std::shared_ptr<torch::jit::CompilationUnit> code;
};

// Loads (or builds) the model of `config` and captures it on its example input, or on
// `data_input` when given (the first samples of a data file's fields on offer, bound to
// forward's arguments by bindInputs with --model.inputs: no shape flags needed), in
// training mode, in bf16 with --train.precision bf16. Where an op has no bf16 kernel, the
// module's tensors go back to their fp32 values and the same inlined forward is
// specialized again in fp32 (CapturedModel::precision_fallback says which op): the model is
// loaded and inlined once. Throws ppstage::Error for anything the user can fix (a missing
// file, a model that fails on its example input).
CapturedModel captureForSplit(const Config& config, const InputSpec* data_input = nullptr);

// The model of `train` (a training capture's split, its loaded tensors not yet released)
// in eval mode, for evaluation: no dropout, BatchNorm on its running statistics, as
// module.eval() makes it. Specialized from the same inlined forward (no second load or
// capture), in what training computes in, its shapes recorded on `data_input` as
// captureForSplit's. Throws ppstage::Error where the eval-mode model fails on its example
// input (in bf16: an op without a bf16 kernel that training does not reach).
CapturedModel evalCaptureOf(const ModelSplit& train, const Config& config,
                            const InputSpec* data_input);

// `batch` samples of `captured`'s example inputs (makeExampleInputs), floating ones in
// what it computes in (bf16 with --train.precision bf16).
std::vector<at::Tensor> exampleInputsOf(const CapturedModel& captured, int64_t batch,
                                        uint64_t seed);

// Cuts `captured` into stages as `pipeline` says (partitionStages: at its split points, or
// balanced by params or FLOPs) and finds the parameters tied across them.
ModelSplit splitCaptured(CapturedModel captured, const PipelineConfig& pipeline);

// captureForSplit, then splitCaptured.
ModelSplit splitModel(const Config& config, const InputSpec* data_input = nullptr);

// Once the stages hold their own copies, the loaded model's tensors go: the module, and the
// values of the graph's parameters, which keep their shapes and dtypes on the meta device
// (checkpoint manifests and the model summary read them; tied paths keep sharing one) and
// their values only for random keys (a scalar each); the module's code stays (`code`).
void releaseLoadedTensors(ModelSplit& split);

// Whether `pipeline` balances its stages by measured time: the planner cuts them before
// the split (train/auto_plan.h, cutByTime), into split points.
bool balancesByTime(const PipelineConfig& pipeline);

}  // namespace ppstage
