// See documents.h.
#include "documents.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

bool blankLine(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

class ByteTokens : public TokenSource {
 public:
  explicit ByteTokens(std::string bytes) : bytes_(std::move(bytes)) {}
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  void read(int64_t first, int64_t count, int64_t* out) const override {
    for (int64_t i = 0; i < count; ++i) {
      out[i] = static_cast<unsigned char>(bytes_[static_cast<size_t>(first + i)]);
    }
  }

 private:
  std::string bytes_;
};

class DocumentDataset : public Dataset {
 public:
  DocumentDataset(std::shared_ptr<const TokenSource> tokens, std::vector<int64_t> begins,
                  std::vector<int64_t> lengths, int64_t seq_len, int64_t token_bound,
                  std::string what)
      : tokens_(std::move(tokens)),
        begins_(std::move(begins)),
        lengths_(std::move(lengths)),
        seq_len_(seq_len),
        what_(std::move(what)),
        fields_(tokenWindowFields(seq_len, token_bound)) {}

  int64_t size() const override { return static_cast<int64_t>(lengths_.size()); }
  const std::vector<SampleField>& fields() const override { return fields_; }
  // Over the whole source: input ids and labels are its tokens.
  std::optional<std::pair<int64_t, int64_t>> valueRange(size_t field,
                                                        int64_t ignored) const override {
    return tokens_->valueRange(ignored);
  }
  int64_t length(int64_t index) const override { return lengths_.at(static_cast<size_t>(index)); }
  at::Tensor sample(size_t field, int64_t index) const override {
    const int64_t n = length(index);
    at::Tensor out = at::empty({n}, at::kLong);
    tokens_->read(begins_.at(static_cast<size_t>(index)) + static_cast<int64_t>(field), n,
                  out.data_ptr<int64_t>());
    return out;
  }
  std::string describe() const override {
    const auto [shortest, longest] = std::minmax_element(lengths_.begin(), lengths_.end());
    double sum = 0;
    for (const int64_t n : lengths_) sum += static_cast<double>(n);
    return detail::concat(what_, ", ", size(), " documents of ", *shortest, " to ", *longest,
                          " tokens (mean ", std::round(10 * sum / static_cast<double>(size())) / 10,
                          "), cut at ", seq_len_);
  }

 private:
  std::shared_ptr<const TokenSource> tokens_;
  std::vector<int64_t> begins_;
  std::vector<int64_t> lengths_;  // each sample's: its document's tokens - 1, at most seq_len
  int64_t seq_len_;
  std::string what_;
  std::vector<SampleField> fields_;
};

}  // namespace

DocumentRanges paragraphRanges(std::string_view text) {
  DocumentRanges ranges;
  int64_t begin = -1;  // of the paragraph being read; -1: between paragraphs
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t newline = text.find('\n', pos);
    const size_t end = newline == std::string_view::npos ? text.size() : newline + 1;
    const bool blank = blankLine(text.substr(pos, end - pos));
    if (blank && begin >= 0) {
      ranges.emplace_back(begin, static_cast<int64_t>(pos));
      begin = -1;
    } else if (!blank && begin < 0) {
      begin = static_cast<int64_t>(pos);
    }
    pos = end;
  }
  if (begin >= 0) ranges.emplace_back(begin, static_cast<int64_t>(text.size()));
  return ranges;
}

DocumentRanges eotRanges(const TokenSource& tokens, int64_t eot) {
  const int64_t n = tokens.size();
  if (eot < 0) return {{0, n}};
  DocumentRanges ranges;
  constexpr int64_t kChunk = 1 << 16;
  std::vector<int64_t> chunk(kChunk);
  int64_t begin = 0;
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t count = std::min(kChunk, n - first);
    tokens.read(first, count, chunk.data());
    for (int64_t i = 0; i < count; ++i) {
      if (chunk[static_cast<size_t>(i)] != eot) continue;
      ranges.emplace_back(begin, first + i + 1);
      begin = first + i + 1;
    }
  }
  if (begin < n) ranges.emplace_back(begin, n);
  return ranges;
}

std::unique_ptr<Dataset> documentDataset(std::shared_ptr<const TokenSource> tokens,
                                         const DocumentRanges& ranges, int64_t seq_len,
                                         int64_t token_bound, const std::string& what) {
  std::vector<int64_t> begins, lengths;
  for (const auto& [begin, end] : ranges) {
    const int64_t n = std::min(end - begin, seq_len + 1);
    if (n < 2) continue;
    begins.push_back(begin);
    lengths.push_back(n - 1);
  }
  PPSTAGE_CHECK(!lengths.empty(), what, " has no document of 2 tokens or more (a token and its ",
                "next-token target)");
  return std::make_unique<DocumentDataset>(std::move(tokens), std::move(begins), std::move(lengths),
                                           seq_len, token_bound, what);
}

std::shared_ptr<const TokenSource> byteTokens(std::string bytes) {
  return std::make_shared<ByteTokens>(std::move(bytes));
}

}  // namespace ppstage
