// gzip-compressed files (Debian ships data sets and texts gzipped: Fashion-MNIST's IDX
// files, /usr/share/doc's texts): found by their magic number and inflated into memory with
// zlib. Internal to data/.
#pragma once

#include <string>

namespace ppstage {

// Whether `bytes` start with gzip's magic number (1f 8b).
bool isGzip(const std::string& bytes);

// The inflated content of the gzip bytes `packed`. Throws ppstage::Error "<where> is a
// damaged gzip file (zlib: ...)" for bytes cut short or corrupt.
std::string gunzip(const std::string& packed, const std::string& where);

}  // namespace ppstage
