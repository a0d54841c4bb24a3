#include "support/test_support.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

namespace ppstage::test {

std::string fixturePath(const std::string& name) {
  return std::string(PPSTAGE_FIXTURES_DIR) + "/" + name;
}

Config fixtureConfig(const std::string& name) {
  std::ifstream file(fixturePath("fixtures.json"));
  if (!file) throw std::runtime_error("cannot read fixtures.json");
  const nlohmann::json inputs = nlohmann::json::parse(file);
  const nlohmann::json& input = inputs.at(name);
  Config config;
  config.model.name = fixturePath(name);
  config.model.input_dtype = parseChoice<InputDtype>(input.at("dtype").get<std::string>());
  config.model.input_shape = input.at("shape").get<std::vector<int64_t>>();
  if (input.contains("vocab_size")) config.model.vocab_size = input.at("vocab_size");
  config.train.batch_size = config.model.input_shape.front();
  return config;
}

std::vector<std::string> modelFixtures() {
  std::vector<std::string> names;
  for (const std::string folder : {"", "real/"}) {
    std::ifstream file(fixturePath(folder + "fixtures.json"));
    if (!file) throw std::runtime_error("cannot read " + folder + "fixtures.json");
    const nlohmann::json models = nlohmann::json::parse(file);
    for (const auto& entry : models.items()) names.push_back(folder + entry.key());
  }
  return names;
}

Config builtinConfig(const std::string& name, int64_t layers, bool tie_embeddings) {
  Config config;
  config.model.name = name;
  config.model.layers = layers;
  config.model.d_model = 32;
  config.model.heads = 4;
  config.model.vocab_size = 64;
  config.model.seq_len = 16;
  config.model.tie_embeddings = tie_embeddings;
  config.train.batch_size = 4;
  return config;
}

double maxRelDiff(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a - b).abs().max().item<double>() / scale;
}

}  // namespace ppstage::test
