// How one step's documents, samples of different lengths (Dataset::length), make
// micro-batches: --data.seq_len_policy.
//
//   fixed     every micro-batch is padded to --model.seq_len (the padded baseline; windows
//             need no padding at all)
//   bucket    each micro-batch is padded to the shortest of --data.buckets (and
//             --model.seq_len, always the last) its longest document fits
//   variable  each micro-batch is padded to its longest document's length
//
// With bucket and variable each replica's share of the step's global batch is first ordered
// by length, longest first (stable, so ties keep the sample order), then cut into
// micro-batches as before: each micro-batch holds documents of like length, and little is
// padded. The
// order depends only on the step's samples, so every rank, and a single process with any
// number of micro-batches, puts the same documents together. Padding is masked out of the
// loss: inputs are padded with token 0, targets with --train.ignore_index.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "ppstage/config/config.h"

namespace ppstage {

class Dataset;

class SequenceBatches {
 public:
  // `lengths`: every sample's (Dataset::length); `max_length`: --model.seq_len; `buckets`
  // (bucket): ascending, empty for a quarter, half and all of max_length. Throws
  // ppstage::Error for a bucket longer than max_length.
  SequenceBatches(SeqLenPolicy policy, std::vector<int64_t> buckets, int64_t max_length,
                  std::vector<int64_t> lengths);

  // The documents of `data` as `config` batches them, for a model of `max_length` tokens.
  static SequenceBatches of(const Dataset& data, const DataConfig& config, int64_t max_length);

  SeqLenPolicy policy() const { return policy_; }
  // Whether micro-batches differ in length (bucket, variable): messages between stages
  // then carry their shapes, and receive buffers are views of the longest.
  bool varies() const { return policy_ != SeqLenPolicy::kFixed; }
  int64_t maxLength() const { return max_length_; }
  // The lengths bucket pads to, ascending, max_length last.
  const std::vector<int64_t>& buckets() const { return buckets_; }
  int64_t size() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t length(int64_t index) const { return lengths_.at(static_cast<size_t>(index)); }

  // The step's global batch `indices` in the order micro-batches take them: cut into
  // `replicas` equal parts (data-parallel replicas), each ordered by length (see above), so
  // that no replica gets all the longest documents.
  std::vector<int64_t> arrange(std::vector<int64_t> indices, int64_t replicas = 1) const;
  // The length a micro-batch of the samples `indices[first, first + count)` is padded to.
  int64_t paddedLength(const std::vector<int64_t>& indices, int64_t first, int64_t count) const;

 private:
  SeqLenPolicy policy_;
  std::vector<int64_t> buckets_;
  int64_t max_length_;
  std::vector<int64_t> lengths_;
};

// Field `field` of `data`'s samples `indices`, each padded at its end with `pad` to
// `length` tokens: (indices, length).
at::Tensor padField(const Dataset& data, size_t field, const std::vector<int64_t>& indices,
                    int64_t length, int64_t pad);

// What documents are padded with: token 0, and in the target field (also where the model
// takes the labels as an input, --train.loss model) the loss's ignore index.
struct Padding {
  size_t target = 0;
  int64_t ignore_index = -100;
  int64_t of(size_t field) const { return field == target ? ignore_index : 0; }
};

// One micro-batch: fields `fields` of the samples `indices[first, first + count)`, stacked;
// for documents (`sequences` not null) each padded as `padding` says to the length the
// policy gives the micro-batch.
std::vector<at::Tensor> microBatchOf(const Dataset& data, const std::vector<size_t>& fields,
                                     const std::vector<int64_t>& indices, int64_t first,
                                     int64_t count, const SequenceBatches* sequences,
                                     const Padding& padding);

}  // namespace ppstage
