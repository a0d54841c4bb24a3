// Resolves --model.name to a TorchScript module and its example input.
#include "ppstage/models/model_source.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/serialization/import.h>

#include <fstream>

#include "ppstage/core/error.h"
#include "ppstage/models/builtin_models.h"

namespace ppstage {
namespace {

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

torch::jit::Module loadScriptFile(const std::string& path) {
  PPSTAGE_CHECK(std::ifstream(path).good(), "model file '", path,
                "' not found (built-in models are gpt and mlp)");
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const c10::Error& e) {
    throw Error(detail::concat(
        "cannot load '", path, "' as a TorchScript model (save it with ",
        "torch.jit.save of a scripted or traced module): ", firstLine(e.what_without_backtrace())));
  }
  // ppstage trains: dropout and friends behave as in training.
  module.train(true);
  return module;
}

}  // namespace

bool isBuiltinModel(const std::string& name) { return name == "gpt" || name == "mlp"; }

LoadedModel loadModel(const ModelConfig& model, const TrainConfig& train) {
  const auto seed = static_cast<uint64_t>(train.seed);
  if (model.name == "gpt") {
    return {buildGpt(model, seed), "gpt",
            InputSpec{at::kLong, {train.batch_size, model.seq_len}, model.vocab_size}};
  }
  if (model.name == "mlp") {
    return {buildMlp(model, seed), "mlp",
            InputSpec{at::kFloat, {train.batch_size, model.seq_len, model.d_model}, 0}};
  }
  LoadedModel loaded{loadScriptFile(model.name), model.name, {}};
  loaded.input.dtype = model.input_dtype == InputDtype::kFloat32 ? at::kFloat : at::kLong;
  loaded.input.shape = model.input_shape.empty()
                           ? std::vector<int64_t>{train.batch_size, model.seq_len}
                           : model.input_shape;
  loaded.input.token_bound = model.vocab_size;
  return loaded;
}

at::Tensor makeExampleInput(const InputSpec& spec, int64_t batch, uint64_t seed) {
  if (spec.samples) return spec.samples(batch);
  PPSTAGE_CHECK(!spec.shape.empty(), "the example input needs a shape (--model.input_shape)");
  std::vector<int64_t> shape = spec.shape;
  shape[0] = batch;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  if (at::isFloatingType(spec.dtype))
    return at::randn(shape, gen, at::device(at::kCPU).dtype(spec.dtype));
  return at::randint(spec.token_bound, shape, gen, at::device(at::kCPU).dtype(spec.dtype));
}

}  // namespace ppstage
