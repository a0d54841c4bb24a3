// The built-in residual MLP (see include/ppstage/models/builtin_models.h): the smallest
// model with repeated blocks, for fast tests.
#include "ppstage/models/builtin_models.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <vector>

#include "layers.h"

namespace ppstage {
namespace {

torch::jit::Module residualBlock(ScriptModuleBuilder& builder, const ModelConfig& c,
                                 at::Generator& gen) {
  return builder.make(
      "ResidualMlpBlock",
      [&](torch::jit::Module& m) {
        m.register_module("norm", layers::layerNorm(builder, c.d_model));
        m.register_module(
            "ff", layers::feedForward(builder, c.d_model, c.mlp_ratio * c.d_model, c.dropout, gen));
      },
      R"(
def forward(self, x):
    return x + self.ff.forward(self.norm.forward(x))
)");
}

std::string mlpForward(int64_t layers) {
  std::string source = "\ndef forward(self, x):\n    # x: (B, T, d) -> (B, T, d)\n";
  source += layers::callEachInTurn("layers", layers);
  source += "    return self.head.forward(self.norm.forward(x))\n";
  return source;
}

}  // namespace

torch::jit::Module buildMlp(const ModelConfig& c, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  ScriptModuleBuilder builder;
  std::vector<torch::jit::Module> blocks;
  for (int64_t i = 0; i < c.layers; ++i) blocks.push_back(residualBlock(builder, c, gen));
  return builder.make(
      "ResidualMlp",
      [&](torch::jit::Module& m) {
        m.register_module("layers", layers::moduleList(builder, blocks));
        m.register_module("norm", layers::layerNorm(builder, c.d_model));
        m.register_module("head", layers::linear(builder, c.d_model, c.d_model, gen));
      },
      mlpForward(c.layers));
}

}  // namespace ppstage
