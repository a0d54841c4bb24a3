// See include/ppstage/data/sequence_batches.h.
#include "ppstage/data/sequence_batches.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "ppstage/core/error.h"
#include "ppstage/data/dataset.h"

namespace ppstage {
namespace {

// A quarter, half and all of `max_length`, without repeats or zeros.
std::vector<int64_t> defaultBuckets(int64_t max_length) {
  std::vector<int64_t> buckets;
  for (const int64_t b : {max_length / 4, max_length / 2, max_length}) {
    if (b > 0 && (buckets.empty() || b > buckets.back())) buckets.push_back(b);
  }
  return buckets;
}

}  // namespace

SequenceBatches::SequenceBatches(SeqLenPolicy policy, std::vector<int64_t> buckets,
                                 int64_t max_length, std::vector<int64_t> lengths)
    : policy_(policy),
      buckets_(buckets.empty() ? defaultBuckets(max_length) : std::move(buckets)),
      max_length_(max_length),
      lengths_(std::move(lengths)) {
  for (const int64_t b : buckets_) {
    PPSTAGE_CHECK(b <= max_length_, "--data.buckets go up to the sequence length (", max_length_,
                  "); got ", b);
  }
  if (buckets_.back() != max_length_) buckets_.push_back(max_length_);
  for (const int64_t n : lengths_) {
    PPSTAGE_INTERNAL_ASSERT(n >= 1 && n <= max_length_, "a document of ", n,
                            " tokens, past the longest ", max_length_);
  }
}

SequenceBatches SequenceBatches::of(const Dataset& data, const DataConfig& config,
                                    int64_t max_length) {
  std::vector<int64_t> lengths(static_cast<size_t>(data.size()));
  for (int64_t i = 0; i < data.size(); ++i) lengths[static_cast<size_t>(i)] = data.length(i);
  return SequenceBatches(config.seq_len_policy, config.buckets, max_length, std::move(lengths));
}

std::vector<int64_t> SequenceBatches::arrange(std::vector<int64_t> indices,
                                              int64_t replicas) const {
  if (!varies()) return indices;
  const auto part = static_cast<int64_t>(indices.size()) / std::max<int64_t>(1, replicas);
  for (int64_t r = 0; r < replicas; ++r) {
    std::stable_sort(indices.begin() + r * part, indices.begin() + (r + 1) * part,
                     [this](int64_t a, int64_t b) { return length(a) > length(b); });
  }
  return indices;
}

int64_t SequenceBatches::paddedLength(const std::vector<int64_t>& indices, int64_t first,
                                      int64_t count) const {
  if (policy_ == SeqLenPolicy::kFixed) return max_length_;
  int64_t longest = 1;
  for (int64_t i = first; i < first + count; ++i) {
    longest = std::max(longest, length(indices.at(static_cast<size_t>(i))));
  }
  if (policy_ == SeqLenPolicy::kVariable) return longest;
  return *std::lower_bound(buckets_.begin(), buckets_.end(), longest);
}

at::Tensor padField(const Dataset& data, size_t field, const std::vector<int64_t>& indices,
                    int64_t length, int64_t pad) {
  at::Tensor out = at::full({static_cast<int64_t>(indices.size()), length}, pad, at::kLong);
  for (size_t i = 0; i < indices.size(); ++i) {
    const at::Tensor sample = data.sample(field, indices[i]);
    PPSTAGE_INTERNAL_ASSERT(sample.size(0) <= length, "a sample of ", sample.size(0),
                            " tokens padded to ", length);
    out[static_cast<int64_t>(i)].narrow(0, 0, sample.size(0)).copy_(sample);
  }
  return out;
}

std::vector<at::Tensor> microBatchOf(const Dataset& data, const std::vector<size_t>& fields,
                                     const std::vector<int64_t>& indices, int64_t first,
                                     int64_t count, const SequenceBatches* sequences,
                                     const Padding& padding) {
  const std::vector<int64_t> samples(indices.begin() + first, indices.begin() + first + count);
  if (sequences == nullptr) return stackFields(data, fields, samples);
  const int64_t length = sequences->paddedLength(indices, first, count);
  std::vector<at::Tensor> out;
  for (const size_t field : fields) {
    out.push_back(padField(data, field, samples, length, padding.of(field)));
  }
  return out;
}

}  // namespace ppstage
