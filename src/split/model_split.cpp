// See include/ppstage/split/model_split.h.
#include "ppstage/split/model_split.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/embedding_tables.h"
#include "ppstage/graph/graph_runner.h"
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

// The values a module's floating tensors had before castFloatingTensors cast them, by
// tensor: what a bf16 capture's fp32 master weights are, and what the module goes back to
// where bf16 falls back to fp32.
struct Fp32Values {
  std::unordered_map<const c10::TensorImpl*, at::Tensor> before;  // every floating tensor's
  std::unordered_set<const c10::TensorImpl*> trainable;           // parameters that require grad
};

// Casts `module`'s floating tensors (parameters, buffers, other tensor attributes) to
// `dtype` in place (the same tensors, so the inlined forward holds them cast).
Fp32Values castFloatingTensors(torch::jit::Module& module, at::ScalarType dtype) {
  Fp32Values fp32;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (p.value.requires_grad()) fp32.trainable.insert(p.value.unsafeGetTensorImpl());
  }
  at::NoGradGuard no_grad;
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    if (!attribute.value.isTensor()) continue;
    at::Tensor tensor = attribute.value.toTensor();
    if (!tensor.is_floating_point()) continue;
    auto [it, fresh] = fp32.before.try_emplace(tensor.unsafeGetTensorImpl());
    if (!fresh) continue;          // a tensor with several paths, cast already
    it->second = tensor.detach();  // the fp32 storage: set_data gives the tensor new storage
    tensor.set_data(tensor.to(dtype));
  }
  return fp32;
}

// castFloatingTensors undone: `module`'s tensors hold their fp32 values again.
void restoreFloatingTensors(torch::jit::Module& module, const Fp32Values& fp32) {
  at::NoGradGuard no_grad;
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    if (!attribute.value.isTensor()) continue;
    at::Tensor tensor = attribute.value.toTensor();
    const auto it = fp32.before.find(tensor.unsafeGetTensorImpl());
    if (it != fp32.before.end() && tensor.scalar_type() != it->second.scalar_type()) {
      tensor.set_data(it->second);
    }
  }
}

// One forward and backward of `model` on `inputs` (on copies of its tensors), for a kernel
// the forward probes never reach: a bf16 backward this LibTorch lacks
// ("hardshrink_backward_cpu" not implemented for 'BFloat16'). Throws ppstage::Error naming it.
void checkBackwardRuns(const ModelGraph& model, const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> values(inputs.begin(), inputs.end());
  for (const ModelParameter& p : model.parameters) {
    at::Tensor copy = p.value.detach().clone();
    if (p.is_parameter && copy.is_floating_point()) copy.requires_grad_(true);
    values.emplace_back(copy);
  }
  try {
    // From the first output only, as training's loss does.
    const at::Tensor first =
        GraphRunner(model.graph->copy(), "backward check").run(values).at(0).toTensor();
    if (first.requires_grad()) first.to(at::kFloat).sum().backward();
  } catch (const std::exception& e) {  // the interpreter's errors are not all c10::Error
    throw Error("the model's backward fails: " + rootCause(errorMessage(e)));
  }
}

// The first output (firstModelOutput) of `module`'s forward, in eval mode and without
// autograd, on `inputs` bound to its arguments `names`; every submodule's mode is restored.
at::Tensor evalOutputOf(torch::jit::Module& module, const std::vector<std::string>& names,
                        const std::vector<at::Tensor>& inputs) {
  std::vector<std::pair<torch::jit::Module, bool>> modes;  // outermost first
  for (const torch::jit::Module& m : module.modules()) modes.emplace_back(m, m.is_training());
  module.eval();  // no dropout: its draws would differ between two lengths
  c10::IValue output;
  try {
    at::NoGradGuard no_grad;
    torch::jit::Kwargs kwargs;
    for (size_t i = 0; i < inputs.size(); ++i) kwargs[names.at(i)] = inputs[i];
    output = module.get_method("forward")({}, kwargs);
  } catch (...) {
    for (auto& [m, training] : modes) m.train(training);
    throw;
  }
  for (auto& [m, training] : modes) m.train(training);
  return firstModelOutput(output);
}

// Whether the model's first output at a token changes when tokens follow it: its outputs
// (b, L, ...) on `inputs` cut to `short_length` against the first short_length positions of
// those on all of them, in eval mode. A causal model's (GPT, an RNN) do not change, so the
// padding after a document is invisible to it; a bidirectional encoder's without a mask
// do. False where not known: an output without the sequence in dimension 1.
bool seesLaterTokens(CapturedModel& captured, const std::vector<at::Tensor>& inputs,
                     int64_t short_length) {
  torch::jit::Module& module = captured.model.module;
  const std::vector<std::string>& names = captured.graph.input_names;
  const at::Tensor all = evalOutputOf(module, names, inputs);
  const at::Tensor cut = evalOutputOf(module, names, narrowSequences(inputs, short_length));
  const int64_t length = inputs.at(0).size(1);
  if (all.dim() < 2 || !all.is_floating_point() || all.size(1) != length ||
      cut.dim() != all.dim() || cut.size(1) != short_length) {
    return false;
  }
  return !at::allclose(all.narrow(1, 0, short_length).to(at::kFloat), cut.to(at::kFloat), 1e-3,
                       1e-4);
}

// Micro-batches of different lengths: how every shape of `captured` follows the sequence
// length too, from probes at half the example's (recordLengthGrowth). Throws
// ppstage::Error, naming the cause, when the model fails on shorter inputs (a model traced
// at one length).
void addLengthGrowth(CapturedModel& captured,
                     const std::function<std::vector<at::Tensor>(int64_t)>& make_input,
                     const Config& config) {
  const at::Tensor& first = captured.example_inputs.at(0);
  PPSTAGE_CHECK(first.dim() >= 2, "--data.seq_len_policy ", toString(config.data.seq_len_policy),
                " needs a model input with a sequence dimension; its input is ",
                shapeText(first.sizes().vec()));
  const int64_t length = first.size(1), short_length = length / 2;
  try {
    recordLengthGrowth(captured.graph, make_input, config.train.batch_size, short_length,
                       captured.shapes);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::vector<at::Tensor> cut = narrowSequences(make_input(2), short_length);
    throw Error(detail::concat(
        "--data.seq_len_policy ", toString(config.data.seq_len_policy),
        " needs a model that takes shorter sequences, but it fails on its example input cut to ",
        short_length, " tokens (of ", length, "; a model traced at one length?): ",
        describeModelFailure(captured.graph, cut, errorMessage(e))));
  }
}

// `captured.model`'s example input: `data_input` bound to forward's arguments where it
// offers named fields, `data_input` as it is where it does not, else the model's own.
void bindExampleInput(CapturedModel& captured, const Config& config, const InputSpec* data_input) {
  InputSpec& input = captured.model.input;
  if (data_input != nullptr && !data_input->names.empty()) {
    const InputBinding binding =
        bindInputs(captured.model.module, data_input->names, config.model.inputs);
    input = boundInputSpec(*data_input, binding);
    captured.input_fields = binding.fields;
  } else if (data_input != nullptr) {
    input = *data_input;
  }
}

// Specializes `captured.forward` for `mode` on the example inputs and records every value's
// shape on them (and, where lengths vary, how each follows the length); a bf16 training
// graph's backward is run once too.
void specializeCaptured(CapturedModel& captured, const Config& config, ForwardMode mode) {
  Stopwatch watch;
  const InputSpec& input = captured.model.input;
  const uint64_t seed = static_cast<uint64_t>(config.train.seed);
  const auto make_input = [&](int64_t batch) { return exampleInputsOf(captured, batch, seed); };
  try {
    captured.graph = specializeForward(*captured.forward, mode,
                                       make_input(std::min<int64_t>(config.train.batch_size, 2)));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("the model fails on an example input", 0) != 0) throw;
    throw Error(what + " (the example input is set by " + input.source + ")");
  }
  captured.timings.capture_s += watch.lap();
  captured.example_inputs = make_input(config.train.batch_size);
  try {
    captured.shapes = recordValueShapes(captured.graph, make_input, config.train.batch_size);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // the interpreter's errors are not all c10::Error
    throw Error(detail::concat(
        "the model fails on its example input (",
        inputsText(captured.graph.input_names, captured.example_inputs), ", set by ", input.source,
        "): ", describeModelFailure(captured.graph, captured.example_inputs, errorMessage(e))));
  }
  if (config.data.seq_len_policy != SeqLenPolicy::kFixed) {
    addLengthGrowth(captured, make_input, config);
  }
  if (captured.compute_dtype != at::kFloat && mode == ForwardMode::kAsInlined) {
    checkBackwardRuns(captured.graph, make_input(2));
  }
  captured.timings.shapes_s += watch.lap();
}

// The cause in a capture's error ("\"cdist\" not implemented for 'BFloat16' (aten::cdist)"),
// without what the example input was and where it came from.
std::string causeOf(const std::string& error) {
  std::string cause = error;
  const size_t colon = cause.find("): ");
  if (cause.rfind("the model fails on", 0) == 0 && colon != std::string::npos) {
    cause = cause.substr(colon + 3);
  }
  const size_t source = cause.find(" (the example input is set by");
  if (source != std::string::npos) cause.resize(source);
  return cause;
}

}  // namespace

std::vector<at::Tensor> exampleInputsOf(const CapturedModel& captured, int64_t batch,
                                        uint64_t seed) {
  std::vector<at::Tensor> inputs = makeExampleInputs(captured.model.input, batch, seed);
  for (at::Tensor& t : inputs) {
    if (t.is_floating_point() && captured.compute_dtype != at::kFloat) {
      t = t.to(captured.compute_dtype);
    }
  }
  return inputs;
}

// Before the first example input runs: the data's ids must index inside every embedding
// they feed, or the model fails deep in aten::embedding ("index out of range in self").
void checkDataIdsFit(const CapturedModel& captured, const Config& config,
                     const InputSpec* data_input) {
  const InputSpec& input = captured.model.input;
  if (!input.value_range) return;
  for (const EmbeddingTable& table : embeddingTablesOf(captured.forward->model)) {
    const auto ids = input.value_range(table.input);
    if (!ids) continue;
    // The data's field name: what the user knows from their file.
    const std::string name = data_input->names.empty()
                                 ? "input"
                                 : data_input->names.at(captured.input_fields.at(table.input));
    checkIdsFit(table, *ids, name, "--data.path '" + config.data.path + "'",
                vocabSizeAdvice(config.model, ids->second));
  }
}

CapturedModel captureForSplit(const Config& config, const InputSpec* data_input) {
  Stopwatch watch;
  CapturedModel captured;
  captured.model = loadModel(config.model, config.train);
  bindExampleInput(captured, config, data_input);
  torch::jit::Module& module = captured.model.module;
  Fp32Values fp32;
  if (config.train.precision == Precision::kBf16) {
    fp32 = castFloatingTensors(module, at::kBFloat16);
    captured.compute_dtype = at::kBFloat16;
  }
  captured.timings.load_s = watch.lap();
  captured.forward =
      std::make_shared<const InlinedForward>(inlineForward(module, captured.model.input.names));
  captured.timings.capture_s = watch.lap();
  checkDataIdsFit(captured, config, data_input);
  const auto specialize = [&] {
    specializeCaptured(captured, config, ForwardMode::kAsInlined);
    if (config.data.seq_len_policy == SeqLenPolicy::kFixed) return;
    const std::vector<at::Tensor> two =
        exampleInputsOf(captured, 2, static_cast<uint64_t>(config.train.seed));
    captured.sees_later_tokens = seesLaterTokens(captured, two, two.at(0).size(1) / 2);
  };
  try {
    specialize();
  } catch (const Error& e) {
    // An op without a bf16 kernel in this LibTorch ("... not implemented for 'BFloat16'
    // (in module 'x', aten::y)"), or a model that mixes dtypes once cast: train in fp32.
    const std::string why = e.what();
    if (captured.compute_dtype == at::kFloat || why.find("BFloat16") == std::string::npos) throw;
    restoreFloatingTensors(module, fp32);
    fp32 = Fp32Values();
    captured.compute_dtype = at::kFloat;
    captured.precision_fallback = causeOf(why);
    specialize();
  }
  for (const ModelParameter& p : captured.graph.parameters) {
    const c10::TensorImpl* impl = p.value.unsafeGetTensorImpl();
    if (fp32.trainable.count(impl) > 0)
      captured.master_values.emplace(p.path, fp32.before.at(impl));
  }
  return captured;
}

CapturedModel evalCaptureOf(const ModelSplit& train, const Config& config,
                            const InputSpec* data_input) {
  PPSTAGE_INTERNAL_ASSERT(train.forward != nullptr,
                          "the eval-mode model is made before the loaded tensors go");
  CapturedModel captured;
  captured.model = train.model;  // the same module: its tensors, in what training computes in
  bindExampleInput(captured, config, data_input);
  captured.forward = train.forward;
  captured.compute_dtype = train.compute_dtype;
  captured.precision_fallback = train.precision_fallback;
  captured.sees_later_tokens = train.sees_later_tokens;
  try {
    specializeCaptured(captured, config, ForwardMode::kEval);
  } catch (const Error& e) {
    const std::string why = e.what();
    if (train.compute_dtype == at::kFloat || why.find("BFloat16") == std::string::npos) throw;
    throw Error("--eval.every: the eval-mode model fails in bf16 (" + causeOf(why) +
                "), which training runs in; train with --train.precision fp32");
  }
  return captured;
}

bool balancesByTime(const PipelineConfig& pipeline) {
  return pipeline.balance == Balance::kTime && pipeline.split_points.empty();
}

ModelSplit splitCaptured(CapturedModel captured, const PipelineConfig& pipeline) {
  Stopwatch watch;
  ModelSplit split;
  split.partition = partitionStages(captured.graph, captured.shapes, pipeline);
  split.timings = captured.timings;
  split.timings.plan_s = watch.lap();
  split.stages = extractStages(captured.graph, split.partition, captured.shapes);
  split.ties = findTiedParameters(captured.graph, split.stages);
  split.timings.extract_s = watch.lap();
  split.model = std::move(captured.model);
  split.forward = std::move(captured.forward);
  split.graph = std::move(captured.graph);
  split.example_inputs = std::move(captured.example_inputs);
  split.input_fields = std::move(captured.input_fields);
  split.compute_dtype = captured.compute_dtype;
  split.master_values = std::move(captured.master_values);
  split.precision_fallback = std::move(captured.precision_fallback);
  split.sees_later_tokens = captured.sees_later_tokens;
  return split;
}

ModelSplit splitModel(const Config& config, const InputSpec* data_input) {
  return splitCaptured(captureForSplit(config, data_input), config.pipeline);
}

void releaseLoadedTensors(ModelSplit& split) {
  if (split.model.module._ivalue() != nullptr) {
    split.code = split.model.module._ivalue()->compilation_unit();
  }
  split.model.module = torch::jit::Module();
  split.forward = nullptr;  // it holds the module's tensors too
  split.model.input.samples = nullptr;
  // Keyed by the loaded tensor: tied paths share one. A loaded tensor stays alive until the
  // last path holding it is swapped, so no key is reused while it is looked up.
  std::map<const c10::TensorImpl*, at::Tensor> meta;
  for (ModelParameter& p : split.graph.parameters) {
    if (!p.value.defined() || p.random_key) continue;
    auto [it, fresh] = meta.try_emplace(p.value.unsafeGetTensorImpl());
    if (fresh) it->second = at::empty(p.value.sizes(), p.value.options().device(at::kMeta));
    p.value = it->second;
  }
}

}  // namespace ppstage
