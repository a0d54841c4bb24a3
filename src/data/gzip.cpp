// See gzip.h.
#include "gzip.h"

#include <zlib.h>

#include <cstdint>

#include "ppstage/core/error.h"

namespace ppstage {

bool isGzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
         static_cast<uint8_t>(bytes[1]) == 0x8b;
}

std::string gunzip(const std::string& packed, const std::string& where) {
  z_stream z{};
  PPSTAGE_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, "zlib cannot start inflating ", where);
  std::string out;
  char buffer[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(packed.size());
  int status = Z_OK;
  while (status == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    status = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - z.avail_out);
  }
  inflateEnd(&z);
  PPSTAGE_CHECK(status == Z_STREAM_END, where,
                " is a damaged gzip file (zlib: ", z.msg != nullptr ? z.msg : "cut short", ")");
  return out;
}

}  // namespace ppstage
