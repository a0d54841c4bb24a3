// NumPy's .npy format (numpy.lib.format): the magic "\x93NUMPY", a version (1.0: a 2-byte
// header length; 2.0 and 3.0: 4 bytes), then a Python dict literal padded with spaces,
// {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }, then the data.
// The file is mapped and the array is a tensor over the mapping (no copy), which keeps
// the mapping alive.
#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <sstream>

#include "named_arrays.h"
#include "ppstage/core/error.h"
#include "ppstage/core/mapped_file.h"
#include "ppstage/core/text.h"

namespace ppstage {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

// The text after `'key':` in the header dict, up to the next top-level comma or brace.
std::string dictValue(const std::string& dict, const std::string& key, const std::string& where) {
  const size_t at = dict.find("'" + key + "'");
  PPSTAGE_CHECK(at != std::string::npos, where, ": its header has no '", key, "'");
  size_t begin = dict.find(':', at) + 1;
  while (begin < dict.size() && dict[begin] == ' ') ++begin;
  size_t end = begin;
  int depth = 0;
  for (; end < dict.size(); ++end) {
    const char c = dict[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  size_t last = end;
  while (last > begin && dict[last - 1] == ' ') --last;
  return dict.substr(begin, last - begin);
}

std::vector<int64_t> parseShape(const std::string& text, const std::string& where) {
  PPSTAGE_CHECK(text.size() >= 2 && text.front() == '(' && text.back() == ')', where,
                ": cannot read its shape ", text);
  std::vector<int64_t> shape;
  std::istringstream in(text.substr(1, text.size() - 2));
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    int64_t d = -1;
    std::istringstream number(item);
    number >> d;
    PPSTAGE_CHECK(!number.fail() && d >= 0, where, ": cannot read its shape ", text);
    shape.push_back(d);
  }
  return shape;
}

NpyHeader parseHeader(const MappedFile& file, const std::string& where) {
  const uint8_t* p = file.data();
  PPSTAGE_CHECK(file.size() >= kMagicBytes + 4 && std::memcmp(p, kMagic, kMagicBytes) == 0, where,
                " is not a NumPy .npy file: it does not start with the magic \\x93NUMPY");
  const int major = p[6];
  PPSTAGE_CHECK(major >= 1 && major <= 3, where, " is .npy version ", major, ", not 1, 2 or 3");
  const size_t length_bytes = major == 1 ? 2 : 4;
  size_t length = 0;
  for (size_t i = 0; i < length_bytes; ++i) length |= static_cast<size_t>(p[8 + i]) << (8 * i);
  NpyHeader header;
  header.data_offset = 8 + length_bytes + length;
  PPSTAGE_CHECK(header.data_offset <= file.size(), where, " is cut short inside its header");
  const std::string dict(reinterpret_cast<const char*>(p) + 8 + length_bytes, length);
  header.descr = dictValue(dict, "descr", where);
  header.fortran_order = dictValue(dict, "fortran_order", where) == "True";
  header.shape = parseShape(dictValue(dict, "shape", where), where);
  return header;
}

// The tensor dtype of an .npy descr, and whether it is an unsigned type LibTorch lacks
// (widened on reading). Throws for big-endian, structured and other dtypes.
at::ScalarType dtypeOf(const std::string& quoted, const std::string& where, bool& widen) {
  const std::string descr = quoted.size() >= 2 ? quoted.substr(1, quoted.size() - 2) : quoted;
  static const std::pair<const char*, at::ScalarType> kTypes[] = {
      {"f4", at::kFloat}, {"f8", at::kDouble}, {"f2", at::kHalf}, {"i8", at::kLong},
      {"i4", at::kInt},   {"i2", at::kShort},  {"i1", at::kChar}, {"u1", at::kByte},
      {"b1", at::kBool},  {"u2", at::kInt},    {"u4", at::kLong}};
  const bool little = !descr.empty() && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=');
  for (const auto& [name, dtype] : kTypes) {
    if (little && descr.substr(1) == name) {
      widen = descr[1] == 'u' && descr[2] != '1';
      return dtype;
    }
  }
  throw Error(detail::concat(where, " has dtype ", quoted, ", which ppstage cannot read: use a ",
                             "little-endian float16/32/64, int8/16/32/64, uint8/16/32 or bool"));
}

// Unsigned 16/32-bit values from `raw`, widened to `dtype` (int32 / int64).
at::Tensor widened(const uint8_t* raw, const std::vector<int64_t>& shape, at::ScalarType dtype) {
  at::Tensor out = at::empty(shape, dtype);
  const int64_t n = out.numel();
  if (dtype == at::kInt) {
    const auto* in = reinterpret_cast<const uint16_t*>(raw);
    int32_t* o = out.data_ptr<int32_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i];
  } else {
    const auto* in = reinterpret_cast<const uint32_t*>(raw);
    int64_t* o = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i];
  }
  return out;
}

}  // namespace

NamedArray readNpy(const std::string& path, const std::string& name) {
  auto file = std::make_shared<MappedFile>(path, "the .npy file");
  const std::string where = "the .npy file '" + path + "'";
  const NpyHeader header = parseHeader(*file, where);
  PPSTAGE_CHECK(!header.fortran_order, where, " is in Fortran order; save it in C order ",
                "(numpy.ascontiguousarray)");
  bool widen = false;
  const at::ScalarType dtype = dtypeOf(header.descr, where, widen);
  PPSTAGE_CHECK(!header.shape.empty(), where, " holds a scalar; samples go along the first ",
                "dimension");
  for (int64_t d : header.shape) {  // 0 holds nothing; the strides may not fit int64
    PPSTAGE_CHECK(d > 0, where, " holds no values: its shape is ", shapeText(header.shape));
  }
  const size_t item = widen ? (dtype == at::kInt ? 2 : 4) : at::elementSize(dtype);
  size_t bytes = item;
  for (int64_t d : header.shape) {
    PPSTAGE_CHECK(!__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes), where,
                  " has a shape too large to be a file: ", shapeText(header.shape));
  }
  PPSTAGE_CHECK(file->size() - header.data_offset == bytes, where, " has ",
                file->size() - header.data_offset, " bytes of data; its header (", header.descr,
                ", shape ", shapeText(header.shape), ") says ", bytes);
  const uint8_t* raw = file->data() + header.data_offset;
  if (widen) return {name, widened(raw, header.shape, dtype)};
  at::Tensor values = at::from_blob(
      const_cast<uint8_t*>(raw), header.shape, [file](void*) {}, at::TensorOptions().dtype(dtype));
  return {name, values};
}

}  // namespace ppstage
