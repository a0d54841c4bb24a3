// Helpers shared by ppstage's tests: fixture models, example inputs, tensor comparison.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage::test {

// Absolute path of tests/fixtures/<name>.
std::string fixturePath(const std::string& name);

// A config that loads fixture `name` with the example input recorded in fixtures.json.
Config fixtureConfig(const std::string& name);

// The TorchScript models of fixtures.json and real/fixtures.json: "unet.pt", "real/vit.pt".
std::vector<std::string> modelFixtures();

// A config for a small built-in model ("gpt" or "mlp").
Config builtinConfig(const std::string& name, int64_t layers, bool tie_embeddings = true);

// max |a - b| / max(max |b|, 1e-12): 0 when bitwise equal.
double maxRelDiff(const at::Tensor& a, const at::Tensor& b);

}  // namespace ppstage::test
