// See include/ppstage/data/dataset.h.
#include "ppstage/data/dataset.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <numeric>
#include <random>

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
      : bytes_(std::move(bytes)), name_(std::move(name)), seq_len_(seq_len) {}

  int64_t size() const override { return (static_cast<int64_t>(bytes_.size()) - 1) / seq_len_; }
  at::Tensor input(int64_t index) const override { return window(index, 0); }
  at::Tensor target(int64_t index) const override { return window(index, 1); }
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
};

// Random samples drawn from (seed, index): token sequences whose targets are the inputs
// shifted by one (cross-entropy), or inputs with targets of the output's shape (mse):
// sin(input) when the output has the input's shape (a function the model can learn),
// standard normal otherwise.
class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(DataRequest request) : r_(std::move(request)) {}

  int64_t size() const override { return 0; }
  at::Tensor input(int64_t index) const override {
    if (r_.loss == LossKind::kCrossEntropy) return tokens(index).narrow(-1, 0, lastDim());
    at::Generator gen = at::detail::createCPUGenerator(sampleSeed(r_.seed, index, 0));
    if (isIntegral()) return at::randint(r_.input.token_bound, r_.input.shape, gen, at::kLong);
    return at::randn(r_.input.shape, gen, r_.input.dtype);
  }
  at::Tensor target(int64_t index) const override {
    if (r_.loss == LossKind::kCrossEntropy) return tokens(index).narrow(-1, 1, lastDim());
    if (!isIntegral() && r_.output.shape == r_.input.shape) return at::sin(input(index));
    at::Generator gen = at::detail::createCPUGenerator(sampleSeed(r_.seed, index, 1));
    return at::randn(r_.output.shape, gen, r_.output.dtype);
  }
  std::string describe() const override {
    return detail::concat("synthetic ", r_.loss == LossKind::kCrossEntropy ? "tokens" : "samples",
                          " (input ", shapeText(r_.input.shape), ", seed ", r_.seed, ")");
  }

 private:
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
};

void checkCrossEntropy(const DataRequest& r) {
  PPSTAGE_CHECK(at::isIntegralType(r.input.dtype, false) && !r.input.shape.empty(),
                "cross_entropy needs a model that takes token ids; this one takes ", r.input.dtype,
                " ", shapeText(r.input.shape), " (use --train.loss mse)");
  PPSTAGE_CHECK(!r.output.shape.empty() &&
                    product(r.output.shape) / r.output.shape.back() == product(r.input.shape),
                "cross_entropy needs one row of logits per input token; the model maps ",
                shapeText(r.input.shape), " tokens to an output of ", shapeText(r.output.shape));
  PPSTAGE_CHECK(r.input.token_bound <= r.output.shape.back(), "the data has token ids up to ",
                r.input.token_bound - 1, " but the model's output has only ", r.output.shape.back(),
                " classes");
}

}  // namespace

std::unique_ptr<Dataset> openDataset(const DataConfig& config, const DataRequest& request) {
  if (config.path == "synthetic") {
    PPSTAGE_CHECK(!request.input.shape.empty() || request.loss == LossKind::kMse,
                  "synthetic token data needs a model input with a sequence dimension");
    if (request.loss == LossKind::kCrossEntropy) checkCrossEntropy(request);
    return std::make_unique<SyntheticDataset>(request);
  }
  const bool embedded = config.path.empty();
  const std::string source = embedded ? "the embedded text" : "--data.path '" + config.path + "'";
  PPSTAGE_CHECK(request.loss == LossKind::kCrossEntropy, source, " is byte-level text: it ",
                "needs --train.loss cross_entropy (or --data.path synthetic)");
  PPSTAGE_CHECK(request.input.shape.size() == 1, source, " gives sequences of token ids; ",
                "the model takes samples of shape ", shapeText(request.input.shape),
                " (use --data.path synthetic)");
  DataRequest text = request;
  text.input.token_bound = kByteVocabulary;
  PPSTAGE_CHECK(request.output.shape.empty() || request.output.shape.back() >= kByteVocabulary,
                source, " has byte tokens (0-255) but the model's vocabulary has ",
                request.output.shape.empty() ? 0 : request.output.shape.back(),
                " entries (set --model.vocab_size 256, or use --data.path synthetic)");
  checkCrossEntropy(text);
  std::string bytes =
      embedded ? std::string(embeddedText()) : readFile(config.path, "the data file --data.path");
  const int64_t seq_len = request.input.shape[0];
  PPSTAGE_CHECK(static_cast<int64_t>(bytes.size()) >= seq_len + 1, source, " has ", bytes.size(),
                " bytes, shorter than one sequence of ", seq_len,
                " tokens plus its next-token target (", seq_len + 1, " bytes)");
  return std::make_unique<TextDataset>(std::move(bytes),
                                       embedded ? embeddedTextName() : config.path, seq_len);
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

std::vector<int64_t> SampleOrder::samples(int64_t first, int64_t count) const {
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t position = first + i;
    if (size_ == 0) {
      indices.push_back(position);
    } else {
      indices.push_back(epoch(position / size_)[static_cast<size_t>(position % size_)]);
    }
  }
  return indices;
}

at::Tensor stackInputs(const Dataset& data, const std::vector<int64_t>& indices) {
  std::vector<at::Tensor> samples;
  for (int64_t i : indices) samples.push_back(data.input(i));
  return at::stack(samples);
}

at::Tensor stackTargets(const Dataset& data, const std::vector<int64_t>& indices) {
  std::vector<at::Tensor> samples;
  for (int64_t i : indices) samples.push_back(data.target(i));
  return at::stack(samples);
}

}  // namespace ppstage
