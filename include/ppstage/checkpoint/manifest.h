// A checkpoint's manifest: D/step-<8 digits>/manifest.json, written last. It identifies
// the model the checkpoint belongs to, says where each tensor is and which layout wrote
// it, and holds the checksum of every other file, so that a checkpoint is complete exactly
// when its manifest exists and every file matches (see checkpoint/checkpoint_dir.h).
// Tensors are keyed by their original module path, never by stage: any layout can read it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ppstage {

// A file of the checkpoint besides the manifest.
struct CheckpointFile {
  std::string name;  // "tensors-stage0.pt", relative to the step's directory
  int64_t bytes = 0;
  std::string sha256;
};

// A parameter or buffer, stored once (tied paths under the first path of their tie group).
struct SavedTensor {
  std::string path;  // original module path: "layers.0.attn.qkv.weight"
  std::vector<int64_t> shape;
  std::string dtype;           // "float32"
  std::string file;            // the file holding it (CheckpointFile::name)
  bool parameter = true;       // false: a buffer (no optimizer state)
  std::string optimizer_file;  // the file holding its optimizer state; empty: none
};

// The layout that wrote a checkpoint: what resume reports, never what it requires.
struct SavedLayout {
  int pp = 1, dp = 1, tp = 1, stages = 1, stages_per_rank = 1, microbatches = 1;
  std::string schedule;                                 // "1f1b"
  std::string compile_mode;                             // "none"
  std::vector<std::vector<std::string>> stage_modules;  // the split: each stage's units
};

struct Manifest {
  static constexpr const char* kFormat = "ppstage-checkpoint-1";
  int64_t step = 0;   // optimizer steps completed; the next run starts at this step
  std::string time;   // when it was saved, UTC, ISO 8601
  std::string model;  // --model.name
  // sha256 of the captured graph and of every parameter's path, dtype and shape (see
  // checkpoint/model_identity.h): equal for the same model at any layout.
  std::string model_hash;
  std::string optimizer;  // "adamw" | "sgd"
  int64_t seed = 0;       // --train.seed: sample order and random ops follow it
  int64_t batch_size = 0;
  // The saving run's --train.steps and --train.lr_schedule: the schedule's length and shape
  // (0 and "" in checkpoints saved before they were recorded).
  int64_t steps = 0;
  std::string lr_schedule;
  int64_t samples_seen = 0;  // the data order position: samples consumed so far
  // The randomness rewrite's key of each module call ("drop#random_key" -> key); empty
  // when the model has no random ops. See Note [Keyed random ops].
  std::map<std::string, int64_t> random_keys;
  SavedLayout layout;
  std::vector<SavedTensor> tensors;
  std::vector<CheckpointFile> files;
};

std::string manifestToJson(const Manifest& manifest);
// Throws ppstage::Error naming `source` for text that is not a manifest of this format.
Manifest manifestFromJson(const std::string& text, const std::string& source);

}  // namespace ppstage
