// Resolves --model.name to a TorchScript module and its example input.
#include "ppstage/models/model_source.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <fstream>

#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
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

// --model.inputs as (argument, field) pairs: "ARG=FIELD", or "FIELD" for ARG of its name.
std::vector<std::pair<std::string, std::string>> parseMapping(
    const std::vector<std::string>& mapping) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& item : mapping) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      pairs.emplace_back(item, item);
    } else {
      pairs.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
    PPSTAGE_CHECK(!pairs.back().first.empty() && !pairs.back().second.empty(), "--model.inputs '",
                  item, "' is not ARG=FIELD or FIELD");
  }
  return pairs;
}

size_t indexIn(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

// Forward's arguments after self.
std::vector<c10::Argument> forwardArguments(const torch::jit::Module& module) {
  const auto& all = module.get_method("forward").function().getSchema().arguments();
  return std::vector<c10::Argument>(all.begin() + std::min<size_t>(1, all.size()), all.end());
}

// Per forward argument, the field fed to it (an index into `offer`), or offer.size().
std::vector<size_t> fieldPerArgument(const std::vector<c10::Argument>& args,
                                     const std::vector<std::string>& arg_names,
                                     const std::vector<std::string>& offer,
                                     const std::vector<std::string>& mapping) {
  std::vector<size_t> field(args.size(), offer.size());
  const std::string takes = joinText(arg_names, ", ");
  const std::string gives = joinText(offer, ", ");
  for (const auto& [arg, name] : parseMapping(mapping)) {
    const size_t a = indexIn(arg_names, arg);
    PPSTAGE_CHECK(a < args.size(), "--model.inputs names '", arg, "', which the model's forward ",
                  "does not take (it takes ", takes, ")");
    PPSTAGE_CHECK(field[a] == offer.size(), "--model.inputs feeds '", arg, "' twice");
    PPSTAGE_CHECK(indexIn(offer, name) < offer.size(), "--model.inputs feeds '", arg,
                  "' the field '", name, "', which the data does not give (it gives ", gives, ")");
    field[a] = indexIn(offer, name);
  }
  if (!mapping.empty()) return field;
  for (size_t a = 0; a < args.size(); ++a) field[a] = indexIn(offer, arg_names[a]);
  const bool none_by_name =
      std::all_of(field.begin(), field.end(), [&](size_t f) { return f == offer.size(); });
  if (none_by_name && offer.size() == 1 && !args.empty()) field[0] = 0;
  for (size_t f = 0; f < offer.size(); ++f) {
    PPSTAGE_CHECK(std::count(field.begin(), field.end(), f) > 0, "the data gives '", offer[f],
                  "', which is no argument of the model's forward (it takes ", takes, "); feed ",
                  "it with --model.inputs ARG=", offer[f], ", or list only the fields to feed");
  }
  return field;
}

}  // namespace

InputBinding bindInputs(const torch::jit::Module& module, const std::vector<std::string>& offer,
                        const std::vector<std::string>& mapping) {
  const std::vector<c10::Argument> args = forwardArguments(module);
  std::vector<std::string> arg_names;
  for (const c10::Argument& arg : args) arg_names.push_back(arg.name());
  const std::vector<size_t> field = fieldPerArgument(args, arg_names, offer, mapping);
  InputBinding binding;
  for (size_t a = 0; a < args.size(); ++a) {
    if (field[a] == offer.size()) {
      PPSTAGE_CHECK(args[a].default_value().has_value(), "the model's forward needs '",
                    arg_names[a], "', which no data field feeds (the data gives ",
                    joinText(offer, ", "), "); feed it with --model.inputs ", arg_names[a],
                    "=FIELD");
      continue;
    }
    binding.arguments.push_back(arg_names[a]);
    binding.fields.push_back(field[a]);
  }
  return binding;
}

std::string vocabSizeAdvice(const ModelConfig& model, int64_t largest_id) {
  if (!model.builtin()) return "";
  return detail::concat(" (set --model.vocab_size ", largest_id + 1, " or more)");
}

InputSpec boundInputSpec(const InputSpec& offered, const InputBinding& binding) {
  InputSpec spec = offered;
  spec.names = binding.arguments;
  const auto all = offered.samples;
  const std::vector<size_t> fields = binding.fields;
  spec.samples = [all, fields](int64_t batch) {
    const std::vector<at::Tensor> samples = all(batch);
    std::vector<at::Tensor> fed;
    for (size_t f : fields) fed.push_back(samples.at(f));
    return fed;
  };
  if (offered.value_range) {
    const auto ranges = offered.value_range;
    spec.value_range = [ranges, fields](size_t i) { return ranges(fields.at(i)); };
  }
  const at::Tensor first = spec.samples(1).at(0);
  spec.dtype = first.scalar_type();
  spec.shape = first.sizes().vec();
  return spec;
}

LoadedModel loadModel(const ModelConfig& model, const TrainConfig& train) {
  const auto seed = static_cast<uint64_t>(train.seed);
  if (model.name == kGptModel) {
    return {buildGpt(model, seed), kGptModel,
            InputSpec{at::kLong, {train.batch_size, model.seq_len}, model.vocab_size}};
  }
  if (model.name == kMlpModel) {
    return {buildMlp(model, seed), kMlpModel,
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

std::vector<at::Tensor> makeExampleInputs(const InputSpec& spec, int64_t batch, uint64_t seed) {
  if (spec.samples) return spec.samples(batch);
  PPSTAGE_INTERNAL_ASSERT(spec.names.size() <= 1, "several inputs come from a data file's samples");
  return {makeExampleInput(spec, batch, seed)};
}

at::Tensor makeExampleInput(const InputSpec& spec, int64_t batch, uint64_t seed) {
  if (spec.samples) return spec.samples(batch).at(0);
  PPSTAGE_CHECK(!spec.shape.empty(), "the example input needs a shape (--model.input_shape)");
  std::vector<int64_t> shape = spec.shape;
  shape[0] = batch;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  if (at::isFloatingType(spec.dtype))
    return at::randn(shape, gen, at::device(at::kCPU).dtype(spec.dtype));
  return at::randint(spec.token_bound, shape, gen, at::device(at::kCPU).dtype(spec.dtype));
}

}  // namespace ppstage
