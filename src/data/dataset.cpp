// See include/ppstage/data/dataset.h.
#include "ppstage/data/dataset.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include "documents.h"
#include "gzip.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/text.h"
#include "ppstage/data/embedded_text.h"

namespace ppstage {
namespace {

constexpr int64_t kByteVocabulary = 256;

int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// A seed for sample `index` of stream `stream` (0: inputs, 1: targets): splitmix64.
uint64_t sampleSeed(int64_t seed, int64_t index, uint64_t stream) {
  uint64_t z = static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(index) * 0xBF58476D1CE4E5B9ull +
               stream * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Byte-level text: window i is bytes [i*T, i*T + T + 1).
class TextDataset : public Dataset {
 public:
  TextDataset(std::string bytes, std::string name, int64_t seq_len)
      : bytes_(std::move(bytes)),
        name_(std::move(name)),
        seq_len_(seq_len),
        fields_(tokenWindowFields(seq_len, kByteVocabulary)) {}

  int64_t size() const override { return (static_cast<int64_t>(bytes_.size()) - 1) / seq_len_; }
  const std::vector<SampleField>& fields() const override { return fields_; }
  at::Tensor sample(size_t field, int64_t index) const override {
    return window(index, static_cast<int64_t>(field));
  }
  std::string describe() const override {
    return detail::concat(name_, ", ", bytes_.size(), " bytes, ", size(), " sequences of ",
                          seq_len_, " bytes");
  }

 private:
  at::Tensor window(int64_t index, int64_t shift) const {
    at::Tensor out = at::empty({seq_len_}, at::kLong);
    int64_t* data = out.data_ptr<int64_t>();
    const int64_t begin = index * seq_len_ + shift;
    for (int64_t t = 0; t < seq_len_; ++t) {
      data[t] = static_cast<unsigned char>(bytes_[static_cast<size_t>(begin + t)]);
    }
    return out;
  }

  std::string bytes_;
  std::string name_;
  int64_t seq_len_;
  std::vector<SampleField> fields_;
};

// Random samples drawn from (seed, index): token sequences whose targets are the inputs
// shifted by one (cross-entropy), or inputs with targets of the output's shape (mse):
// sin(input) when the output has the input's shape (a function the model can learn),
// standard normal otherwise.
class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(DataRequest request)
      : r_(std::move(request)), fields_{{"input", r_.input}, {"targets", targetShape()}} {}

  int64_t size() const override { return 0; }
  const std::vector<SampleField>& fields() const override { return fields_; }
  at::Tensor sample(size_t field, int64_t index) const override {
    return field == 0 ? input(index) : target(index);
  }
  std::string describe() const override {
    return detail::concat("synthetic ", r_.loss == LossKind::kCrossEntropy ? "tokens" : "samples",
                          " (input ", shapeText(r_.input.shape), ", seed ", r_.seed, ")");
  }

 private:
  SampleShape targetShape() const {
    if (r_.loss == LossKind::kCrossEntropy)
      return {at::kLong, r_.input.shape, r_.input.token_bound};
    return r_.output;
  }
  at::Tensor input(int64_t index) const {
    if (r_.loss == LossKind::kCrossEntropy) return tokens(index).narrow(-1, 0, lastDim());
    at::Generator gen = at::detail::createCPUGenerator(sampleSeed(r_.seed, index, 0));
    if (isIntegral()) return at::randint(r_.input.token_bound, r_.input.shape, gen, at::kLong);
    return at::randn(r_.input.shape, gen, r_.input.dtype);
  }
  at::Tensor target(int64_t index) const {
    if (r_.loss == LossKind::kCrossEntropy) return tokens(index).narrow(-1, 1, lastDim());
    if (!isIntegral() && r_.output.shape == r_.input.shape) return at::sin(input(index));
    at::Generator gen = at::detail::createCPUGenerator(sampleSeed(r_.seed, index, 1));
    return at::randn(r_.output.shape, gen, r_.output.dtype);
  }
  bool isIntegral() const { return at::isIntegralType(r_.input.dtype, false); }
  int64_t lastDim() const { return r_.input.shape.back(); }
  // One more token than the input along the last dimension.
  at::Tensor tokens(int64_t index) const {
    std::vector<int64_t> shape = r_.input.shape;
    shape.back() += 1;
    at::Generator gen = at::detail::createCPUGenerator(sampleSeed(r_.seed, index, 0));
    return at::randint(r_.input.token_bound, shape, gen, at::kLong);
  }
  DataRequest r_;
  std::vector<SampleField> fields_;
};

void checkCrossEntropy(const DataRequest& r) {
  PPSTAGE_CHECK(at::isIntegralType(r.input.dtype, false) && !r.input.shape.empty(),
                "cross_entropy needs a model that takes token ids; this one takes ",
                dtypeName(r.input.dtype), " ", shapeText(r.input.shape), " (use --train.loss mse)");
  checkTargetsFit({"labels", {at::kLong, r.input.shape, r.input.token_bound}}, r.output, r.loss,
                  /*ignore_index=*/-1);
}

// Why byte-level text cannot feed the model of `r`, or "" when it can.
std::string textMismatch(const DataRequest& r) {
  const bool token_ids = at::isIntegralType(r.input.dtype, false) && r.input.shape.size() == 1;
  if (!token_ids) {
    return detail::concat("gives sequences of byte token ids, int64 (seq_len); the model takes ",
                          dtypeName(r.input.dtype), " ", shapeText(r.input.shape),
                          " samples: give it data it takes (a data file, --data.format, or "
                          "--data.path synthetic)");
  }
  if (r.loss != LossKind::kCrossEntropy) {
    return "has next-token targets: it needs --train.loss cross_entropy (or auto)";
  }
  const int64_t classes = r.output.shape.empty() ? 0 : r.output.shape.back();
  const int64_t rows = classes > 0 ? product(r.output.shape) / classes : 0;
  if (rows != product(r.input.shape)) {
    return detail::concat("has one next-token target per input token, but the model's output ",
                          shapeText(r.output.shape), " is not one row of logits per token (",
                          "a sequence classifier?): give it a data file with its labels");
  }
  if (classes < kByteVocabulary) {
    return detail::concat("has byte tokens (0-255) but the model's output has ", classes,
                          " classes",
                          r.builtin_model ? " (set --model.vocab_size 256)"
                                          : ": give it a token file (--data.format tokens) of ids "
                                            "it knows, or --data.path synthetic");
  }
  return "";
}

}  // namespace

void checkTargetsFit(const SampleField& target, const SampleShape& output, LossKind loss,
                     int64_t ignore_index, std::optional<std::pair<int64_t, int64_t>> range) {
  const std::string& name = target.name;
  const SampleShape& t = target.sample;
  if (loss == LossKind::kMse) {
    PPSTAGE_CHECK(t.shape == output.shape, "mse compares the model's output with the targets '",
                  name, "', but one sample of the output is ", shapeText(output.shape),
                  " and one of the targets ", shapeText(t.shape));
    return;
  }
  PPSTAGE_CHECK(at::isIntegralType(t.dtype, false), "cross_entropy needs integer labels; the ",
                "targets '", name, "' are ", dtypeName(t.dtype), " (use --train.loss mse)");
  const int64_t classes = output.shape.empty() ? 0 : output.shape.back();
  PPSTAGE_CHECK(classes > 0 && product(output.shape) / classes == product(t.shape),
                "cross_entropy needs one row of logits per label: one sample of the model's ",
                "output is ", shapeText(output.shape), " and one of the labels '", name, "' ",
                shapeText(t.shape));
  const int64_t highest = range ? range->second : t.token_bound - 1;
  PPSTAGE_CHECK(highest < classes, "the labels '", name, "' go up to ", highest,
                " but the model's output has ", classes, " classes (0 to ", classes - 1, ")");
  PPSTAGE_CHECK(!range || range->first >= 0, "the labels '", name, "' go down to ", range->first,
                ", which is neither a class (0 to ", classes - 1, ") nor --train.ignore_index (",
                ignore_index, ")");
}

std::unique_ptr<Dataset> openDataset(const DataConfig& config, const DataRequest& request) {
  if (config.path == "synthetic") {
    PPSTAGE_CHECK(!request.input.shape.empty() || request.loss == LossKind::kMse,
                  "synthetic token data needs a model input with a sequence dimension");
    if (request.loss == LossKind::kCrossEntropy) checkCrossEntropy(request);
    return std::make_unique<SyntheticDataset>(request);
  }
  const bool embedded = config.path.empty();
  const std::string source = embedded ? "the embedded text" : "--data.path '" + config.path + "'";
  const std::string mismatch = textMismatch(request);
  PPSTAGE_CHECK(mismatch.empty(), source, " ", mismatch);
  std::string bytes =
      embedded ? std::string(embeddedText()) : readFile(config.path, "the data file --data.path");
  std::string name = embedded ? embeddedTextName() : config.path;
  if (!embedded && isGzip(bytes)) {  // a text shipped gzipped: its text, not its bytes
    bytes = gunzip(bytes, "the data file --data.path '" + config.path + "'");
    name += " (gunzipped)";
  }
  const int64_t seq_len = request.input.shape[0];
  if (config.cutsDocuments()) {
    const DocumentRanges paragraphs = paragraphRanges(bytes);
    return documentDataset(byteTokens(std::move(bytes)), paragraphs, seq_len, kByteVocabulary,
                           detail::concat(name, ", ", paragraphs.size(), " paragraphs"));
  }
  PPSTAGE_CHECK(static_cast<int64_t>(bytes.size()) >= seq_len + 1, source, " has ", bytes.size(),
                " bytes, shorter than one sequence of ", seq_len,
                " tokens plus its next-token target (", seq_len + 1, " bytes)");
  return std::make_unique<TextDataset>(std::move(bytes), name, seq_len);
}

SampleOrder::SampleOrder(int64_t dataset_size, int64_t seed) : size_(dataset_size), seed_(seed) {}

const std::vector<int64_t>& SampleOrder::epoch(int64_t e) const {
  for (const auto& [index, order] : cache_) {
    if (index == e) return order;
  }
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(sampleSeed(seed_, e, 2));
  // Fisher-Yates with our own index draws: std::shuffle's algorithm is not specified, and
  // every rank (and every build) must see the same order.
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(order[i - 1], order[j]);
  }
  if (cache_.size() >= 2) cache_.erase(cache_.begin());
  cache_.emplace_back(e, std::move(order));
  return cache_.back().second;
}

std::vector<int64_t> SampleOrder::batch(int64_t step, int64_t batch) const {
  return samples(step * batch, batch);
}

// Note [Permuting without memory]
// A Feistel network over b-bit numbers (b even, 2^b >= n) is a bijection of [0, 2^b) for
// any round function; with four rounds keyed by (seed, epoch, round) it is a seeded
// pseudo-random permutation. Walking the cycle (applying it again while the result is n or
// more) restricts it to a bijection of [0, n): since 2^b < 4n, about four applications on
// average. Every position is computed on its own, with no table.
int64_t SampleOrder::permuted(int64_t e, int64_t i) const {
  int bits = 2;
  while ((int64_t{1} << bits) < size_) bits += 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  const auto key = static_cast<int64_t>(sampleSeed(seed_, e, 3));  // this epoch's
  auto x = static_cast<uint64_t>(i);
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = sampleSeed(key, static_cast<int64_t>(right << 8 | round), 4) & mask;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = left << half | right;
  } while (x >= static_cast<uint64_t>(size_));
  return static_cast<int64_t>(x);
}

std::vector<int64_t> SampleOrder::samples(int64_t first, int64_t count) const {
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t position = first + i;
    if (size_ == 0) {
      indices.push_back(position);
    } else if (size_ > kShuffledInMemory) {
      indices.push_back(permuted(position / size_, position % size_));
    } else {
      indices.push_back(epoch(position / size_)[static_cast<size_t>(position % size_)]);
    }
  }
  return indices;
}

at::Tensor stackField(const Dataset& data, size_t field, const std::vector<int64_t>& indices) {
  std::vector<at::Tensor> samples;
  samples.reserve(indices.size());
  for (int64_t i : indices) samples.push_back(data.sample(field, i));
  return at::stack(samples);
}

std::vector<at::Tensor> stackFields(const Dataset& data, const std::vector<size_t>& fields,
                                    const std::vector<int64_t>& indices) {
  std::vector<at::Tensor> stacked;
  for (size_t field : fields) stacked.push_back(stackField(data, field, indices));
  return stacked;
}

std::string fieldsText(const std::vector<SampleField>& fields) {
  std::vector<std::string> parts;
  for (const SampleField& f : fields) {
    parts.push_back(f.name + " " + dtypeName(f.sample.dtype) + " " + shapeText(f.sample.shape));
  }
  return joinText(parts, ", ");
}

std::vector<SampleField> tokenWindowFields(int64_t seq_len, int64_t token_bound) {
  const SampleShape window{at::kLong, {seq_len}, token_bound};
  return {{"input_ids", window}, {"labels", window}};
}

DataRoles dataRolesOf(const Dataset& data, const DataConfig& config, bool offers_target) {
  const std::vector<SampleField>& fields = data.fields();
  std::vector<std::string> names;
  for (const SampleField& f : fields) names.push_back(f.name);
  const auto find = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  const std::string listed = joinText(names, ", ");
  auto target = static_cast<size_t>(find(config.target));
  if (!config.target.empty()) {
    PPSTAGE_CHECK(target < names.size(), "--data.target '", config.target,
                  "' is not in the data, which gives ", listed);
  }
  // A .npy file given as --data.targets is named after itself (npy_file.cpp).
  const std::string targets_file = std::filesystem::path(config.targets).stem().string();
  for (const std::string& name : {targets_file, std::string("labels"), std::string("label"),
                                  std::string("targets"), std::string("target")}) {
    if (target >= names.size()) target = static_cast<size_t>(find(name));
  }
  PPSTAGE_CHECK(target < names.size(), "the data gives ", listed, " and no target: name one ",
                "labels (or targets), or say which with --data.target");
  PPSTAGE_CHECK(names.size() >= 2, "the data gives only its target '", names[target],
                "', nothing to feed the model");
  DataRoles roles;
  roles.offered_fields.clear();
  for (size_t f = 0; f < names.size(); ++f) {
    if (f != target || offers_target) roles.offered_fields.push_back(f);
  }
  roles.inputs = roles.offered_fields;
  roles.target = target;
  return roles;
}

}  // namespace ppstage
