// data: where training samples come from. A Dataset maps a sample index to one (input,
// target) pair without the batch dimension; a SampleOrder says which samples make up each
// step's global batch, the same on every rank (a function of the seed and the step only).
//
// Kinds (--data.path):
//   ""          the public-domain text embedded in ppstage (embedded_text.h), as bytes
//   "synthetic" random samples drawn from (seed, index)
//   a path      a file read as bytes
// Text is cut into non-overlapping windows of seq_len + 1 bytes: the first seq_len are the
// input token ids, the last seq_len (shifted by one) the next-token targets.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage {

// Shape and dtype of one sample (no batch dimension).
struct SampleShape {
  at::ScalarType dtype = at::kLong;
  std::vector<int64_t> shape;
  int64_t token_bound = 0;  // integer samples are below it
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Number of distinct samples; 0 when unbounded (synthetic).
  virtual int64_t size() const = 0;
  virtual at::Tensor input(int64_t index) const = 0;
  virtual at::Tensor target(int64_t index) const = 0;
  // "embedded text (Jargon File 4.4.7 excerpt, 309840 bytes, 4841 sequences of 64)"
  virtual std::string describe() const = 0;
};

// What the model takes and what its loss compares against.
struct DataRequest {
  SampleShape input;   // the model's input
  SampleShape output;  // the model's first output
  LossKind loss = LossKind::kCrossEntropy;
  int64_t seed = 0;
};

// Opens the data set of `config` for `request`. Throws ppstage::Error when the file is
// missing or shorter than one sequence, or when the data cannot feed this model and loss
// (text needs token-id inputs of one dimension, cross-entropy and a vocabulary of 256).
std::unique_ptr<Dataset> openDataset(const DataConfig& config, const DataRequest& request);

// Which samples each step uses: epochs of a seeded permutation of a bounded data set
// (every sample once per epoch), consecutive indices of an unbounded one.
class SampleOrder {
 public:
  SampleOrder(int64_t dataset_size, int64_t seed);
  // The global batch of `step` (0-based): `batch` sample indices.
  std::vector<int64_t> batch(int64_t step, int64_t batch) const;
  // Positions [first, first + count) of the order (the data order position of a resumed
  // run is the samples it has consumed): batch(step, b) is samples(step * b, b).
  std::vector<int64_t> samples(int64_t first, int64_t count) const;

 private:
  const std::vector<int64_t>& epoch(int64_t e) const;
  int64_t size_;
  int64_t seed_;
  mutable std::vector<std::pair<int64_t, std::vector<int64_t>>> cache_;
};

// Stacks the inputs (or targets) of `indices` into one batch tensor.
at::Tensor stackInputs(const Dataset& data, const std::vector<int64_t>& indices);
at::Tensor stackTargets(const Dataset& data, const std::vector<int64_t>& indices);

}  // namespace ppstage
