// What ties a checkpoint to a model, whatever the layout: the tensors it holds, each under
// one original module path, and a hash of the captured graph with every parameter's path,
// dtype and shape. A checkpoint is refused (before step 1) when either differs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ppstage/checkpoint/manifest.h"

namespace ppstage {

struct ModelGraph;

// The path `model.parameters[index]` is stored under: the first path of its tie group, so
// a tied embedding and LM head are one tensor on disk; else its own path.
std::string storedPath(const ModelGraph& model, int index);

// The dtype a checkpoint stores `t` in: fp32 for bf16 (a model captured for --train.precision
// bf16: its master weights, and buffers widened), else its own.
at::ScalarType storedDtype(const at::Tensor& t);

// The model's parameters and buffers as a checkpoint stores them: one per stored path, in
// the model's order, without file names; random keys are not model state and are left out.
// bf16 tensors (--train.precision bf16) are stored as fp32.
std::vector<SavedTensor> modelTensors(const ModelGraph& model);

// sha256 of the captured graph's text and of every lifted tensor's path, kind, dtype and
// shape. Independent of pp, dp, stages, schedule, compile mode and batch size.
std::string modelHash(const ModelGraph& model);

// The randomness rewrite's keys: "<call>#random_key" -> key (see Note [Keyed random ops]).
std::map<std::string, int64_t> randomKeys(const ModelGraph& model);

// Throws ppstage::Error naming the first difference when the checkpoint in `dir` is not
// of `model`: a tensor missing or extra, "layers.5.attn.qkv.weight: checkpoint has [192,
// 64], model has [256, 64]", another dtype, the random keys, or, with the same tensors,
// another graph.
void checkSameModel(const Manifest& manifest, const std::string& dir, const ModelGraph& model);

}  // namespace ppstage
