// A run's model before it is cut: its data file opened (where the file describes its
// samples), the model captured once on the data's first samples, and the loss the run
// computes. Balance by time, --pipeline.auto, the job's split and evaluation all start from
// one capture (captureRun): evaluation's eval-mode graph is specialized from the same
// inlined forward (split/model_split.h, evalCaptureOf).
#pragma once

#include <memory>
#include <optional>

#include "ppstage/config/config.h"
#include "ppstage/data/dataset.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/split/model_split.h"

namespace ppstage {

// A data file that describes its samples (data/data_files.h), opened before the model so
// that the model is captured on its first samples.
struct DataFile {
  std::shared_ptr<const Dataset> data;
  DataRoles roles;
  InputSpec input;  // the model's example input: the first samples of the input field
};

// The data file of `config`, or nothing when the model shapes the data (the embedded
// text, a text file, synthetic). Throws ppstage::Error for a bad file (data_files.h).
std::optional<DataFile> openDataFileOf(const Config& config);

// The loss of a run of `config`: --train.loss, or (auto) the one `file`'s target dtype
// calls for, or without a data file, `model_input`'s (runtime/loss.h, resolveLossKind).
LossKind runLossKind(const Config& config, const DataFile* file, const InputSpec& model_input);

struct CapturedRun {
  std::optional<DataFile> file;
  CapturedModel model;  // in training mode, in what the run computes in (bf16 or fp32)
  LossKind loss = LossKind::kCrossEntropy;

  // The data file's example input, which the model was captured on; null without one.
  const InputSpec* dataInput() const { return file ? &file->input : nullptr; }
};

// Opens `config`'s data file, captures its model on it in training mode
// (captureForSplit) and resolves the loss. Throws ppstage::Error for a bad data file or a
// model that cannot be captured.
CapturedRun captureRun(const Config& config);

}  // namespace ppstage
