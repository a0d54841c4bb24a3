// `ppstage export`: the inverse of the split. The trained tensors of a checkpoint, found by
// module path, go back into one TorchScript module of the original model (the built-in one,
// or the user's file, loaded afresh), saved with torch.jit.save semantics: Python loads it
// with torch.jit.load, parameters and buffers named as in the original.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppstage/models/model_source.h"

namespace ppstage {

struct Config;

struct ExportResult {
  std::string checkpoint;              // "D/step-00000040"
  int64_t step = 0;                    // steps the checkpoint had trained
  int64_t tensors = 0;                 // parameters and buffers set from it (by module path)
  std::vector<std::string> untouched;  // the module's tensors the checkpoint has none of
  // The forward check: the saved file, loaded back, against the checkpoint's split (its
  // stage count and split points) chained as the pipeline runs it, on the example input.
  // Not done for a model with random ops (their draws differ by design).
  bool forward_checked = false;
  double forward_max_abs_diff = 0;
};

// Exports the newest complete checkpoint of `checkpoint_dir` to `out` (written under a
// temporary name, then renamed). With a non-empty `example_out` and a forward check, also
// writes {"input": x, "output": y} there (torch.load-able): the example input and the
// chained stages' first output, for checking the file from Python. Throws ppstage::Error
// when there is no complete checkpoint, when it is of another model, when the saved file
// does not hold the checkpoint's parameters and buffers, or when its forward differs from
// the stages' by more than 1e-5 of the output's scale. `data_input`: the run's data file's
// example input (a model trained on a data file is captured on its samples); null: the
// model options' (--model.input_shape...).
ExportResult exportModel(const Config& config, const std::string& checkpoint_dir,
                         const std::string& out, const std::string& example_out,
                         const InputSpec* data_input = nullptr);

}  // namespace ppstage
