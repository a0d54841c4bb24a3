// Documents: samples of different lengths, for --data.documents and the bucket and variable
// sequence-length policies (sequence_batches.h). Private to src/data.
//
// A document is a run of tokens of a flat token source (a text's bytes, a token file's
// ids); cut at seq_len + 1 tokens, a document of n tokens is one sample of n - 1: its first
// n - 1 tokens are the input ids, its last n - 1 the next-token targets, as a window's are.
// Documents of fewer than 2 tokens have no target and are left out.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ppstage/data/dataset.h"

namespace ppstage {

// Token ids read from a flat sequence.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t size() const = 0;
  // Tokens [first, first + count) into `out`.
  virtual void read(int64_t first, int64_t count, int64_t* out) const = 0;
  // The smallest and largest token, leaving out `ignored`, as Dataset::valueRange; nullopt
  // when the source does not scan itself.
  virtual std::optional<std::pair<int64_t, int64_t>> valueRange(int64_t ignored) const {
    return std::nullopt;
  }
};

// [begin, end) of each document.
using DocumentRanges = std::vector<std::pair<int64_t, int64_t>>;

// The paragraphs of `text`: runs of lines between blank lines (empty, or only spaces, tabs
// and carriage returns), each with the newline of its last line.
DocumentRanges paragraphRanges(std::string_view text);

// The runs of `tokens` between `eot` tokens, each with the eot that ends it (the model
// learns to end a document); the whole source when eot is -1.
DocumentRanges eotRanges(const TokenSource& tokens, int64_t eot);

// `tokens`' documents at `ranges`, cut at `seq_len` + 1 tokens, as samples of input_ids
// and labels of at most `seq_len` (below `token_bound`; 0: not known). `what` names the
// source in describe(). Throws ppstage::Error when no document has 2 tokens.
std::unique_ptr<Dataset> documentDataset(std::shared_ptr<const TokenSource> tokens,
                                         const DocumentRanges& ranges, int64_t seq_len,
                                         int64_t token_bound, const std::string& what);

// A text's bytes as a token source (byte-level tokens 0-255).
std::shared_ptr<const TokenSource> byteTokens(std::string bytes);

}  // namespace ppstage
