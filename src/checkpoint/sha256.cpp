// See include/ppstage/checkpoint/sha256.h. OpenSSL's libcrypto computes the digest (EVP,
// which uses the CPU's SHA extensions where it has them): a checkpoint is trusted on this
// checksum, so it comes from a library whose SHA-256 is validated and maintained.
#include "ppstage/checkpoint/sha256.h"

#include <openssl/evp.h>

#include "ppstage/core/error.h"

namespace ppstage {

std::string sha256Hex(const void* data, size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  PPSTAGE_INTERNAL_ASSERT(EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr) == 1,
                          "OpenSSL's SHA-256 failed on ", size, " bytes");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

}  // namespace ppstage
