// The built-in models, built as TorchScript modules from C++ so that they travel the same
// path through capture and splitting as a user's torch.jit.save file.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>

#include "ppstage/config/config.h"

namespace ppstage {

// GPT: token + position embedding, `layers` pre-LayerNorm decoder blocks (causal multi-head
// self-attention, GELU MLP, residuals), final LayerNorm, LM head; with tie_embeddings the
// head's weight is the token embedding's tensor.
//   forward(idx: (batch, seq) int64 token ids) -> logits: (batch, seq, vocab_size)
// Module paths: wte, wpe, layers.<i>.{ln1,attn.{qkv,proj},ln2,mlp.{fc,proj}}, ln_f, lm_head.
torch::jit::Module buildGpt(const ModelConfig& config, uint64_t seed);

// MLP: `layers` residual blocks x + proj(gelu(fc(LayerNorm(x)))), final LayerNorm and a
// linear head.
//   forward(x: (batch, seq, d_model) float) -> (batch, seq, d_model)
// Module paths: layers.<i>.{norm,ff.{fc,proj}}, norm, head.
torch::jit::Module buildMlp(const ModelConfig& config, uint64_t seed);

}  // namespace ppstage
