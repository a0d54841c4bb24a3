// SHA-256 (FIPS 180-4) of a byte string, as 64 lowercase hex digits: the checksum a
// checkpoint's manifest records for every file, and the model's identity hash.
#pragma once

#include <cstddef>
#include <string>

namespace ppstage {

std::string sha256Hex(const void* data, size_t size);
inline std::string sha256Hex(const std::string& bytes) {
  return sha256Hex(bytes.data(), bytes.size());
}

}  // namespace ppstage
