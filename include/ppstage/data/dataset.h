// data: where training samples come from. A Dataset maps a sample index to its named
// tensors (fields) without the batch dimension; DataRoles say which field the model takes
// and which one its loss compares against; a SampleOrder says which samples make up each
// step's global batch, the same on every rank (a function of the seed and the step only).
//
// Kinds (--data.path, --data.format):
//   ""          the public-domain text embedded in ppstage (embedded_text.h), as bytes
//   "synthetic" random samples drawn from (seed, index), shaped like the model's input
//   text        a file read as bytes
//   tokens, npy, tensors, idx: data files that describe their own samples (data_files.h)
// Text and token files are cut into windows of seq_len + 1 tokens, window i starting at
// token i * seq_len: the first seq_len are the input ids (`input_ids`), the last seq_len
// (shifted by one) the next-token targets (`labels`); or, with --data.documents (and the
// bucket and variable sequence-length policies), into documents of different lengths
// (Dataset::length), which sequence_batches.h pads into micro-batches.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage {

// Shape and dtype of one sample (no batch dimension).
struct SampleShape {
  at::ScalarType dtype = at::kLong;
  std::vector<int64_t> shape;
  int64_t token_bound = 0;  // integer samples are below it; 0: not known
};

// One named tensor of every sample: "input_ids" int64 (64), "images" float (1, 28, 28).
struct SampleField {
  std::string name;
  SampleShape sample;
};

// The samples of a data set. Reads only: safe to share, not to call from two threads.
class Dataset {
 public:
  virtual ~Dataset() = default;
  // Number of distinct samples; 0 when unbounded (synthetic).
  virtual int64_t size() const = 0;
  // The named tensors of a sample, in the data's own order.
  virtual const std::vector<SampleField>& fields() const = 0;
  // Field `field` of sample `index`: a new tensor of that field's dtype and shape (with
  // length(index) in place of the first dimension, for documents).
  virtual at::Tensor sample(size_t field, int64_t index) const = 0;
  // Documents: the length of sample `index` (its fields' first dimension, at most
  // fields()' shapes'); 0 where every sample has fields()' shapes.
  virtual int64_t length(int64_t index) const { return 0; }
  // "embedded text (Jargon File 4.4.7 excerpt, 309840 bytes, 4841 sequences of 64)"
  virtual std::string describe() const = 0;
  // The smallest and largest value of integer field `field` over every sample, leaving out
  // values equal to `ignored`; nullopt when the data set does not know it, or when every
  // value is `ignored`. Named arrays know it from their values; a token file scans itself
  // once (a pass over the mapping) at the first call.
  virtual std::optional<std::pair<int64_t, int64_t>> valueRange(size_t field,
                                                                int64_t ignored) const {
    return std::nullopt;
  }
};

// "images float32 [1, 28, 28], labels int64 []": what a data set's fields are.
std::string fieldsText(const std::vector<SampleField>& fields);

// The fields of token windows: input_ids and labels, (seq_len) int64 below token_bound.
std::vector<SampleField> tokenWindowFields(int64_t seq_len, int64_t token_bound);

// Which fields of a data set feed the model and which is its loss's target.
struct DataRoles {
  // The fields on offer to forward's arguments: every field but the target (and the target
  // too when the model takes its labels, --train.loss model).
  std::vector<size_t> offered_fields{0};
  // The fields fed, one per model input in its order (a subset of `offer`, once the model's
  // forward has been bound to them; see bindInputs).
  std::vector<size_t> inputs{0};
  size_t target = 1;
};

// The roles of `data`'s fields: the target is the field --data.target names, else the one
// named after the --data.targets file, else the one named labels, label, targets or target;
// every other field, and the target when `offers_target`, is on offer to the model (and
// fed, until a binding says otherwise). Throws ppstage::Error when there is no target, no
// other field, or a --data.target the data does not have.
DataRoles dataRolesOf(const Dataset& data, const DataConfig& config, bool offers_target = false);

// What the model takes and what its loss compares against.
struct DataRequest {
  SampleShape input;   // the model's input
  SampleShape output;  // the model's first output
  LossKind loss = LossKind::kCrossEntropy;
  int64_t seed = 0;
  bool builtin_model = false;  // gpt or mlp: --model.vocab_size changes its vocabulary
};

// Opens a data set whose samples the model shapes (the embedded text, a text file, or
// synthetic: isModelShaped) for `request`. Throws ppstage::Error when the file is missing
// or shorter than one sequence, or when the data cannot feed this model and loss (text
// needs token-id inputs of one dimension, cross-entropy and a vocabulary of 256).
std::unique_ptr<Dataset> openDataset(const DataConfig& config, const DataRequest& request);

// Throws ppstage::Error when the targets `target` cannot be compared by `loss` with one
// sample of the model's first output (`output`): cross_entropy needs integer labels, one
// per row of logits, in [0, classes) (`range`: the labels' smallest and largest value that
// is not `ignore_index`, where known; else target.sample.token_bound); mse the output's
// shape.
void checkTargetsFit(const SampleField& target, const SampleShape& output, LossKind loss,
                     int64_t ignore_index,
                     std::optional<std::pair<int64_t, int64_t>> range = std::nullopt);

// Which samples each step uses: epochs of a seeded permutation of a bounded data set
// (every sample once per epoch), consecutive indices of an unbounded one. Up to
// kShuffledInMemory samples the permutation is a Fisher-Yates shuffle held in memory; a
// larger data set (a token file of billions of tokens) is permuted by a keyed bijection
// computed per position (Note [Permuting without memory]), so it opens at once and costs
// no memory.
class SampleOrder {
 public:
  SampleOrder(int64_t dataset_size, int64_t seed);
  // The global batch of `step` (0-based): `batch` sample indices.
  std::vector<int64_t> batch(int64_t step, int64_t batch) const;
  // Positions [first, first + count) of the order (the data order position of a resumed
  // run is the samples it has consumed): batch(step, b) is samples(step * b, b).
  std::vector<int64_t> samples(int64_t first, int64_t count) const;

  static constexpr int64_t kShuffledInMemory = int64_t{1} << 22;  // 32 MB of indices

 private:
  // Position `i` of epoch `e` of a data set larger than kShuffledInMemory.
  int64_t permuted(int64_t e, int64_t i) const;
  const std::vector<int64_t>& epoch(int64_t e) const;
  int64_t size_;
  int64_t seed_;
  mutable std::vector<std::pair<int64_t, std::vector<int64_t>>> cache_;
};

// Stacks field `field` of the samples `indices` into one batch tensor: (indices, ...).
at::Tensor stackField(const Dataset& data, size_t field, const std::vector<int64_t>& indices);

// stackField of each of `fields`.
std::vector<at::Tensor> stackFields(const Dataset& data, const std::vector<size_t>& fields,
                                    const std::vector<int64_t>& indices);

}  // namespace ppstage
