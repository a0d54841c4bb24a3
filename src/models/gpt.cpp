// The built-in GPT (see include/ppstage/models/builtin_models.h), a TorchScript module.
#include "ppstage/models/builtin_models.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <string>
#include <vector>

#include "layers.h"
#include "ppstage/core/error.h"

namespace ppstage {
namespace {

constexpr double kInitStd = 0.02;

torch::jit::Module embedding(ScriptModuleBuilder& builder, int64_t rows, int64_t d,
                             at::Generator& gen) {
  return builder.make(
      "Embedding",
      [&](torch::jit::Module& m) {
        m.register_parameter("weight", layers::normalInit({rows, d}, kInitStd, gen), false);
      },
      R"(
def forward(self, idx):
    return torch.embedding(self.weight, idx)
)");
}

// forward() of CausalSelfAttention; with dropout, on the attention weights and the output
// (as nanoGPT does).
std::string attentionForward(bool dropout) {
  std::string source = R"(
def forward(self, x):
    # x: (B, T, C) -> (B, T, C)
    B = x.size(0)
    T = x.size(1)
    C = x.size(2)
    hs = C // self.n_head
    q, k, v = self.qkv.forward(x).split(C, 2)
    q = q.view(B, T, self.n_head, hs).transpose(1, 2)   # (B, nh, T, hs)
    k = k.view(B, T, self.n_head, hs).transpose(1, 2)
    v = v.view(B, T, self.n_head, hs).transpose(1, 2)
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / float(hs) ** 0.5)  # (B, nh, T, T)
    future = torch.ones([T, T], device=x.device).triu(1) > 0.5
    att = torch.softmax(att.masked_fill(future, float("-inf")), -1)
)";
  source += dropout ? "    att = self.attn_drop.forward(att)\n" : "";
  source += "    y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)\n";
  source += dropout ? "    return self.resid_drop.forward(self.proj.forward(y))\n"
                    : "    return self.proj.forward(y)\n";
  return source;
}

// Causal multi-head self-attention with a fused qkv projection.
torch::jit::Module attention(ScriptModuleBuilder& builder, const ModelConfig& c,
                             at::Generator& gen) {
  return builder.make(
      "CausalSelfAttention",
      [&](torch::jit::Module& m) {
        m.register_module("qkv", layers::linear(builder, c.d_model, 3 * c.d_model, gen));
        m.register_module("proj", layers::linear(builder, c.d_model, c.d_model, gen));
        m.register_attribute("n_head", c10::IntType::get(), c.heads);
        if (c.dropout > 0) {
          m.register_module("attn_drop", layers::dropout(builder, c.dropout));
          m.register_module("resid_drop", layers::dropout(builder, c.dropout));
        }
      },
      attentionForward(c.dropout > 0));
}

torch::jit::Module block(ScriptModuleBuilder& builder, const ModelConfig& c, at::Generator& gen) {
  return builder.make(
      "Block",
      [&](torch::jit::Module& m) {
        m.register_module("ln1", layers::layerNorm(builder, c.d_model));
        m.register_module("attn", attention(builder, c, gen));
        m.register_module("ln2", layers::layerNorm(builder, c.d_model));
        m.register_module("mlp", layers::feedForward(builder, c.d_model, c.mlp_ratio * c.d_model,
                                                     c.dropout, gen));
      },
      R"(
def forward(self, x):
    x = x + self.attn.forward(self.ln1.forward(x))
    x = x + self.mlp.forward(self.ln2.forward(x))
    return x
)");
}

torch::jit::Module lmHead(ScriptModuleBuilder& builder, const at::Tensor& weight) {
  return builder.make(
      "LMHead", [&](torch::jit::Module& m) { m.register_parameter("weight", weight, false); },
      R"(
def forward(self, x):
    return torch.linear(x, self.weight)
)");
}

// forward() of the whole model: one line per block, as a scripted ModuleList loop unrolls.
std::string gptForward(int64_t layers, bool dropout) {
  std::string source = R"(
def forward(self, idx):
    # idx: (B, T) token ids -> logits (B, T, vocab)
    pos = torch.arange(idx.size(1), device=idx.device)
    x = self.wte.forward(idx) + self.wpe.forward(pos)
)";
  source += dropout ? "    x = self.drop.forward(x)\n" : "";
  source += layers::callEachInTurn("layers", layers);
  source += "    return self.lm_head.forward(self.ln_f.forward(x))\n";
  return source;
}

}  // namespace

torch::jit::Module buildGpt(const ModelConfig& c, uint64_t seed) {
  PPSTAGE_CHECK(c.d_model % c.heads == 0, "--model.heads (", c.heads,
                ") must divide --model.d_model (", c.d_model, ")");
  at::Generator gen = at::detail::createCPUGenerator(seed);
  ScriptModuleBuilder builder;
  torch::jit::Module wte = embedding(builder, c.vocab_size, c.d_model, gen);
  torch::jit::Module wpe = embedding(builder, c.seq_len, c.d_model, gen);
  std::vector<torch::jit::Module> blocks;
  for (int64_t i = 0; i < c.layers; ++i) blocks.push_back(block(builder, c, gen));
  const at::Tensor head_weight = c.tie_embeddings
                                     ? wte.attr("weight").toTensor()
                                     : layers::normalInit({c.vocab_size, c.d_model}, kInitStd, gen);
  return builder.make(
      "GPT",
      [&](torch::jit::Module& m) {
        m.register_module("wte", wte);
        m.register_module("wpe", wpe);
        m.register_module("layers", layers::moduleList(builder, blocks));
        m.register_module("ln_f", layers::layerNorm(builder, c.d_model));
        m.register_module("lm_head", lmHead(builder, head_weight));
        if (c.dropout > 0) m.register_module("drop", layers::dropout(builder, c.dropout));
      },
      gptForward(c.layers, c.dropout > 0));
}

}  // namespace ppstage
