// Where a model comes from: a built-in (gpt, mlp) or a user's TorchScript file, together
// with the example input that gives the plan its shapes and the tests their inputs.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage {

// Describes the tensors fed to the model. dtype, shape and token_bound describe the first
// (the only one a model without a data file gets). Shape is batch first.
struct InputSpec {
  at::ScalarType dtype = at::kLong;
  std::vector<int64_t> shape;  // (batch, ...)
  int64_t token_bound = 0;     // integer inputs are drawn from [0, token_bound)
  // The named tensors: forward's arguments they feed, in forward's order, once bound
  // (bindInputs); before, a data file's fields on offer. Empty: one tensor, fed to
  // forward's first argument.
  std::vector<std::string> names{};
  // When set, example inputs are the data's: `batch` samples of each of `names`.
  std::function<std::vector<at::Tensor>(int64_t batch)> samples{};
  // When set, the smallest and largest value of input `i` (of `names`) over the whole data
  // set, where the data knows it (token files); nullopt where not.
  std::function<std::optional<std::pair<int64_t, int64_t>>(size_t i)> value_range{};
  // What set the shape, for error lines: "--model.input_shape/--model.input_dtype".
  std::string source =
      "--model.input_shape/--model.input_dtype, or by the first samples of a data file";
};

struct LoadedModel {
  torch::jit::Module module;
  std::string name;  // "gpt", "mlp" or the file's path
  InputSpec input;
};

// Builds the built-in model `config.model.name` or loads it as a TorchScript file.
// Throws ppstage::Error when the file is missing or is not a TorchScript module.
LoadedModel loadModel(const ModelConfig& model, const TrainConfig& train);

// For ids up to `largest_id` that a built-in model's vocabulary does not hold: " (set
// --model.vocab_size N or more)"; empty for a user's model, whose vocabulary is its own.
std::string vocabSizeAdvice(const ModelConfig& model, int64_t largest_id);

// Reproducible example inputs following `spec`, one per input, with their batch dimension
// set to `batch`: spec.samples(batch) when set, else drawn from `seed`.
std::vector<at::Tensor> makeExampleInputs(const InputSpec& spec, int64_t batch, uint64_t seed);

// The first of makeExampleInputs (a model with one input).
at::Tensor makeExampleInput(const InputSpec& spec, int64_t batch, uint64_t seed);

// Data fields bound to forward's arguments.
struct InputBinding {
  std::vector<std::string> arguments;  // the arguments fed, in forward's order
  std::vector<size_t> fields;          // per argument, its index in the fields on offer
};

// Binds the fields on `offer` to `module`'s forward arguments: as `mapping` says
// (--model.inputs: "ARG=FIELD" or "FIELD"), else by name, else, for one field on offer and
// no argument of its name, to forward's first argument. Throws ppstage::Error naming what
// does not fit: an argument forward does not take, a field not on offer, a field no
// argument takes (without a mapping), an argument without a default that nothing feeds.
InputBinding bindInputs(const torch::jit::Module& module, const std::vector<std::string>& offer,
                        const std::vector<std::string>& mapping);

// `offered` (a data file's fields on offer) narrowed to what `binding` feeds.
InputSpec boundInputSpec(const InputSpec& offered, const InputBinding& binding);

}  // namespace ppstage
