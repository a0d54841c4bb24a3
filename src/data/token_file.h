// Flat token files (data_files.h says the layout). Private to src/data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ppstage/config/config.h"
#include "ppstage/data/dataset.h"

namespace ppstage {

// Whether `bytes` start with llm.c's token-file magic (20240520 or 20240801).
bool hasTokenHeader(const uint8_t* bytes, size_t size);

// The token file `config.path` as windows of `seq_len` + 1 tokens, or as documents between
// `config.eot` tokens (DataConfig::cutsDocuments), mapped. `config.token_dtype` is for a
// file without a header. Throws ppstage::Error for an empty file, a size that is not a
// multiple of the token size, a header that disagrees with the size, windows of fewer
// than seq_len + 1 tokens, and documents without --data.eot.
std::unique_ptr<Dataset> openTokenFile(const DataConfig& config, int64_t seq_len);

}  // namespace ppstage
