// Data sets of named arrays whose first dimension is the sample: what npy, tensors and idx
// files give (data_files.h). Private to src/data.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "ppstage/data/dataset.h"

namespace ppstage {

// One named array: (samples, ...). Its storage may be a mapped file (see npy_file.cpp).
struct NamedArray {
  std::string name;
  at::Tensor values;
};

// A Dataset over `arrays`, sample i being values[i] of each. Integer arrays get their
// bound (largest value + 1). Throws ppstage::Error (naming `source`) when there are no
// arrays, when their first dimensions differ, or when they hold no sample.
std::unique_ptr<Dataset> arrayDataset(std::vector<NamedArray> arrays, const std::string& source);

// The .npy file at `path` as an array named `name` (npy_file.cpp).
NamedArray readNpy(const std::string& path, const std::string& name);

// The named tensors of a torch.save file, in the dict's order (tensor_file.cpp).
std::vector<NamedArray> readTensorFile(const std::string& path);

// An IDX file (gzipped or not) as an array named `name`: images become (N, 1, H, W)
// float32 in [0, 1], labels (N) int64 (idx_file.cpp).
NamedArray readIdx(const std::string& path, const std::string& name);

}  // namespace ppstage
