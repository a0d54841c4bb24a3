// Layers shared by the built-in models (see layers.h).
#include "layers.h"

#include <ATen/ATen.h>

#include <string>

namespace ppstage::layers {

at::Tensor normalInit(const std::vector<int64_t>& shape, double std, at::Generator& gen) {
  return at::empty(shape, at::kFloat).normal_(0.0, std, gen);
}

std::string callEachInTurn(const std::string& list, int64_t count) {
  std::string lines;
  for (int64_t i = 0; i < count; ++i) {
    lines += "    x = getattr(self." + list + ", \"" + std::to_string(i) + "\").forward(x)\n";
  }
  return lines;
}

torch::jit::Module linear(ScriptModuleBuilder& builder, int64_t in, int64_t out,
                          at::Generator& gen) {
  return builder.make(
      "Linear",
      [&](torch::jit::Module& m) {
        m.register_parameter("weight", normalInit({out, in}, 0.02, gen), false);
        m.register_parameter("bias", at::zeros({out}), false);
      },
      R"(
def forward(self, x):
    return torch.linear(x, self.weight, self.bias)
)");
}

torch::jit::Module layerNorm(ScriptModuleBuilder& builder, int64_t d) {
  return builder.make(
      "LayerNorm",
      [&](torch::jit::Module& m) {
        m.register_parameter("weight", at::ones({d}), false);
        m.register_parameter("bias", at::zeros({d}), false);
        m.register_attribute("normalized_shape", c10::ListType::ofInts(),
                             c10::IValue(std::vector<int64_t>{d}));
      },
      R"(
def forward(self, x):
    return torch.layer_norm(x, self.normalized_shape, self.weight, self.bias, 1e-5)
)");
}

torch::jit::Module feedForward(ScriptModuleBuilder& builder, int64_t d, int64_t hidden,
                               double dropout, at::Generator& gen) {
  return builder.make(
      "FeedForward",
      [&](torch::jit::Module& m) {
        m.register_module("fc", linear(builder, d, hidden, gen));
        m.register_module("proj", linear(builder, hidden, d, gen));
        if (dropout > 0) m.register_module("drop", layers::dropout(builder, dropout));
      },
      dropout > 0 ? R"(
def forward(self, x):
    return self.drop.forward(self.proj.forward(torch.gelu(self.fc.forward(x))))
)"
                  : R"(
def forward(self, x):
    return self.proj.forward(torch.gelu(self.fc.forward(x)))
)");
}

torch::jit::Module dropout(ScriptModuleBuilder& builder, double p) {
  return builder.make(
      "Dropout",
      [&](torch::jit::Module& m) { m.register_attribute("p", c10::FloatType::get(), p); },
      R"(
def forward(self, x):
    return torch.dropout(x, self.p, self.training)
)");
}

torch::jit::Module moduleList(ScriptModuleBuilder& builder,
                              const std::vector<torch::jit::Module>& items) {
  // Lists of different lengths have different attributes, so each length is its own class.
  return builder.make("ModuleList" + std::to_string(items.size()), [&](torch::jit::Module& m) {
    for (size_t i = 0; i < items.size(); ++i) m.register_module(std::to_string(i), items[i]);
  });
}

}  // namespace ppstage::layers
