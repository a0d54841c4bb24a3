// The IDX format of MNIST and Fashion-MNIST (yann.lecun.com/exdb/mnist): a big-endian
// magic 0x0000TTDD (TT 0x08: unsigned bytes; DD: the number of dimensions), DD big-endian
// uint32 sizes, then the values. Debian's dataset-fashion-mnist ships the files gzipped;
// they are inflated into memory (47 MB for the 60000 training images).
#include <ATen/ATen.h>

#include <cstring>

#include "gzip.h"
#include "named_arrays.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"

namespace ppstage {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;

uint32_t bigEndian32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(bytes[at + i]);
  return v;
}

}  // namespace

NamedArray readIdx(const std::string& path, const std::string& name) {
  const std::string where = "the IDX file '" + path + "'";
  std::string bytes = readFile(path, "the IDX file");
  if (isGzip(bytes)) bytes = gunzip(bytes, where);
  const bool magic_ok = bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0 &&
                        static_cast<uint8_t>(bytes[2]) == kUnsignedByte && bytes[3] >= 1 &&
                        bytes[3] <= 4;
  PPSTAGE_CHECK(magic_ok, where, " does not start with an IDX magic number of unsigned bytes ",
                "(00 00 08 01..04)");
  const size_t dims = static_cast<size_t>(bytes[3]);
  PPSTAGE_CHECK(bytes.size() >= 4 + 4 * dims, where, " is cut short inside its header");
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (size_t d = 0; d < dims; ++d) {
    shape.push_back(bigEndian32(bytes, 4 + 4 * d));
    // A size of 0 holds nothing, and its strides over the other sizes may not fit int64.
    PPSTAGE_CHECK(shape.back() > 0, where, " has a size of 0 in its header (found by tests/fuzz)");
    PPSTAGE_CHECK(!__builtin_mul_overflow(count, shape.back(), &count), where,
                  " has sizes too large to be a file");
  }
  const size_t offset = 4 + 4 * dims;
  PPSTAGE_CHECK(bytes.size() - offset == static_cast<size_t>(count), where, " has ",
                bytes.size() - offset, " bytes of values; its header says ", count);
  at::Tensor values = at::empty(shape, at::kByte);
  if (count > 0) {  // an empty tensor's data pointer may be null (found by tests/fuzz)
    std::memcpy(values.data_ptr<uint8_t>(), bytes.data() + offset, static_cast<size_t>(count));
  }
  if (dims == 1) return {name, values.to(at::kLong)};
  // Images: (N, H, W) bytes -> (N, 1, H, W) in [0, 1], as torchvision's ToTensor gives them.
  if (dims == 3) values = values.unsqueeze(1);
  return {name, values.to(at::kFloat).div_(255)};
}

}  // namespace ppstage
