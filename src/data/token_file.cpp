// A flat token file, memory-mapped: uint16 or uint32 token ids, optionally after llm.c's
// header of 256 int32 (magic, version, token count). Window i is tokens
// [i * T, i * T + T + 1), read from the mapping when a step asks for it, so that a file of
// any size opens at once.
#include "token_file.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "documents.h"
#include "ppstage/core/error.h"
#include "ppstage/core/mapped_file.h"

namespace ppstage {
namespace {

constexpr int32_t kUint16Magic = 20240520;  // llm.c's GPT-2 token files, version 1
constexpr int32_t kUint32Magic = 20240801;  // llm.c's LLaMA 3 token files, version 7
constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);

int32_t headerWord(const MappedFile& file, size_t i) {
  int32_t v = 0;
  std::memcpy(&v, file.data() + i * sizeof(int32_t), sizeof(v));
  return v;
}

// The tokens of a mapped file.
class MappedTokens : public TokenSource {
 public:
  MappedTokens(std::unique_ptr<MappedFile> file, size_t offset, size_t token_bytes, int64_t tokens)
      : file_(std::move(file)), offset_(offset), token_bytes_(token_bytes), tokens_(tokens) {}
  int64_t size() const override { return tokens_; }
  void read(int64_t first, int64_t count, int64_t* out) const override {
    const uint8_t* base = file_->data() + offset_;
    for (int64_t i = 0; i < count; ++i) out[i] = token(base, first + i);
  }
  // One pass over the mapping, kept for later calls; a second one leaves out `ignored` when
  // it lies between the smallest and the largest token.
  std::optional<std::pair<int64_t, int64_t>> valueRange(int64_t ignored) const override {
    std::call_once(range_once_, [&] { range_ = scan(-1); });
    if (tokens_ == 0) return std::nullopt;
    if (ignored < range_.first || ignored > range_.second) return range_;
    const std::pair<int64_t, int64_t> kept = scan(ignored);
    if (kept.first > kept.second) return std::nullopt;  // every token is `ignored`
    return kept;
  }

 private:
  // Read in order (the kernel reads ahead), as T, which the compiler vectorizes; its cost
  // at start-up is in docs/benchmarks.md.
  std::pair<int64_t, int64_t> scan(int64_t ignored) const {
    file_->adviseSequential(true);
    const std::pair<int64_t, int64_t> range =
        token_bytes_ == 2 ? scanAs<uint16_t>(ignored) : scanAs<uint32_t>(ignored);
    file_->adviseSequential(false);
    return range;
  }

  template <typename T>
  std::pair<int64_t, int64_t> scanAs(int64_t ignored) const {
    const uint8_t* base = file_->data() + offset_;
    const bool skips = ignored >= 0 && ignored <= std::numeric_limits<T>::max();
    const T skipped = skips ? static_cast<T>(ignored) : T{0};
    T lowest = std::numeric_limits<T>::max();
    T highest = 0;
    bool any = false;
    for (int64_t i = 0; i < tokens_; ++i) {
      T t = 0;
      std::memcpy(&t, base + sizeof(T) * static_cast<size_t>(i), sizeof(T));
      const bool kept = !skips || t != skipped;
      lowest = kept ? std::min(lowest, t) : lowest;
      highest = kept ? std::max(highest, t) : highest;
      any = any || kept;
    }
    if (!any) return {1, 0};  // nothing kept: an empty range
    return {lowest, highest};
  }

  int64_t token(const uint8_t* base, int64_t i) const {
    if (token_bytes_ == 2) {
      uint16_t v = 0;
      std::memcpy(&v, base + 2 * i, 2);
      return v;
    }
    uint32_t v = 0;
    std::memcpy(&v, base + 4 * i, 4);
    return v;
  }

  std::unique_ptr<MappedFile> file_;
  size_t offset_;
  size_t token_bytes_;
  int64_t tokens_;
  mutable std::once_flag range_once_;
  mutable std::pair<int64_t, int64_t> range_;
};

class TokenFileDataset : public Dataset {
 public:
  TokenFileDataset(std::unique_ptr<MappedTokens> tokens, int64_t seq_len, std::string what)
      : tokens_(std::move(tokens)),
        seq_len_(seq_len),
        what_(std::move(what)),
        fields_(tokenWindowFields(seq_len, 0)) {}

  int64_t size() const override { return (tokens_->size() - 1) / seq_len_; }
  const std::vector<SampleField>& fields() const override { return fields_; }
  // Over the whole file: input ids and labels are its tokens.
  std::optional<std::pair<int64_t, int64_t>> valueRange(size_t field,
                                                        int64_t ignored) const override {
    return tokens_->valueRange(ignored);
  }
  at::Tensor sample(size_t field, int64_t index) const override {
    at::Tensor out = at::empty({seq_len_}, at::kLong);
    tokens_->read(index * seq_len_ + static_cast<int64_t>(field), seq_len_,
                  out.data_ptr<int64_t>());
    return out;
  }
  std::string describe() const override {
    return detail::concat(what_, ", ", size(), " sequences of ", seq_len_, ")");
  }

 private:
  std::unique_ptr<MappedTokens> tokens_;
  int64_t seq_len_;
  std::string what_;
  std::vector<SampleField> fields_;
};

}  // namespace

bool hasTokenHeader(const uint8_t* bytes, size_t size) {
  if (size < sizeof(int32_t)) return false;
  int32_t magic = 0;
  std::memcpy(&magic, bytes, sizeof(magic));
  return magic == kUint16Magic || magic == kUint32Magic;
}

std::unique_ptr<Dataset> openTokenFile(const DataConfig& config, int64_t seq_len) {
  const std::string& path = config.path;
  const TokenDtype dtype = config.token_dtype;
  auto file = std::make_unique<MappedFile>(path, "the token file --data.path");
  const std::string where = "the token file '" + path + "'";
  PPSTAGE_CHECK(file->size() > 0, where, " is empty");
  size_t offset = 0;
  size_t token_bytes = dtype == TokenDtype::kUint16 ? 2 : 4;
  std::string layout = dtype == TokenDtype::kUint16 ? "uint16" : "uint32";
  if (hasTokenHeader(file->data(), file->size())) {
    PPSTAGE_CHECK(file->size() >= kHeaderBytes, where, " is shorter than its 1024-byte header");
    const bool uint16 = headerWord(*file, 0) == kUint16Magic;
    const int32_t version = headerWord(*file, 1);
    PPSTAGE_CHECK(version == (uint16 ? 1 : 7), where, " has header version ", version,
                  "; with magic ", headerWord(*file, 0), " ppstage reads version ", uint16 ? 1 : 7);
    offset = kHeaderBytes;
    token_bytes = uint16 ? 2 : 4;
    layout = detail::concat(uint16 ? "uint16" : "uint32", " after a header");
    const auto count = static_cast<size_t>(static_cast<uint32_t>(headerWord(*file, 2)));
    PPSTAGE_CHECK(file->size() - offset == count * token_bytes, where, "'s header says ", count,
                  " tokens (", count * token_bytes, " bytes) but ", file->size() - offset,
                  " bytes follow it");
  }
  const size_t data_bytes = file->size() - offset;
  PPSTAGE_CHECK(data_bytes % token_bytes == 0, where, " has ", data_bytes,
                " bytes of tokens, not a multiple of ", token_bytes, " (", layout,
                "): is --data.token_dtype right?");
  const auto tokens = static_cast<int64_t>(data_bytes / token_bytes);
  PPSTAGE_CHECK(config.cutsDocuments() || tokens >= seq_len + 1, where, " has ", tokens,
                " tokens, fewer than one sequence of ", seq_len, " plus its next-token target (",
                seq_len + 1, ")");
  const std::string what =
      detail::concat("token file '", path, "' (", layout, ", ", tokens, " tokens");
  auto mapped = std::make_unique<MappedTokens>(std::move(file), offset, token_bytes, tokens);
  if (!config.cutsDocuments()) {
    return std::make_unique<TokenFileDataset>(std::move(mapped), seq_len, what);
  }
  PPSTAGE_CHECK(config.eot >= 0, "documents of ", where, " need --data.eot, the token that ends ",
                "each one (50256 for GPT-2's tokens)");
  std::shared_ptr<const TokenSource> shared = std::move(mapped);
  const DocumentRanges ranges = eotRanges(*shared, config.eot);
  return documentDataset(shared, ranges, seq_len, 0, what + ")");
}

}  // namespace ppstage
