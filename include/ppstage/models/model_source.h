// Where a model comes from: a built-in (gpt, mlp) or a user's TorchScript file, together
// with the example input that gives the plan its shapes and the tests their inputs.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage {

// Describes the model's one tensor input. Shape is batch first.
struct InputSpec {
  at::ScalarType dtype = at::kLong;
  std::vector<int64_t> shape;  // (batch, ...)
  int64_t token_bound = 0;     // integer inputs are drawn from [0, token_bound)
  // When set, example inputs are the data's: `batch` samples, (batch, ...) as `shape`.
  std::function<at::Tensor(int64_t batch)> samples;
  // What set the shape, for error lines: "--model.input_shape/--model.input_dtype".
  std::string source =
      "--model.input_shape/--model.input_dtype, or by the first samples of a data file";
};

struct LoadedModel {
  torch::jit::Module module;
  std::string name;  // "gpt", "mlp" or the file's path
  InputSpec input;
};

// Whether `name` (--model.name) is a built-in model rather than a file.
bool isBuiltinModel(const std::string& name);

// Builds the built-in model `config.model.name` or loads it as a TorchScript file.
// Throws ppstage::Error when the file is missing or is not a TorchScript module.
LoadedModel loadModel(const ModelConfig& model, const TrainConfig& train);

// A reproducible example input following `spec`, with its batch dimension set to `batch`:
// spec.samples(batch) when set, else drawn from `seed`.
at::Tensor makeExampleInput(const InputSpec& spec, int64_t batch, uint64_t seed);

}  // namespace ppstage
