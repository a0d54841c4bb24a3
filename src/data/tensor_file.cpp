// A torch.save file of a dict of tensors, read with LibTorch's pickle loader (the zip
// format torch.save writes since PyTorch 1.6).
#include <torch/csrc/jit/serialization/pickle.h>

#include "named_arrays.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"

namespace ppstage {

std::vector<NamedArray> readTensorFile(const std::string& path) {
  const std::string where = "the tensors file '" + path + "'";
  const std::string bytes = readFile(path, "the tensors file --data.path");
  PPSTAGE_CHECK(bytes.size() >= 4 && bytes.compare(0, 4, "PK\x03\x04") == 0, where,
                " is not a torch.save file: it does not start with the zip magic PK\\3\\4");
  c10::IValue saved;
  try {
    saved = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    throw Error(detail::concat(where, " cannot be loaded: ", e.what_without_backtrace()));
  }
  PPSTAGE_CHECK(saved.isGenericDict(), where, " holds a ", saved.tagKind(),
                "; save a dict of tensors: torch.save({\"input_ids\": x, \"labels\": y}, path)");
  std::vector<NamedArray> arrays;
  for (const auto& entry : saved.toGenericDict()) {
    PPSTAGE_CHECK(entry.key().isString() && entry.value().isTensor(), where,
                  " holds an entry that is not a string key with a tensor value");
    arrays.push_back({entry.key().toStringRef(), entry.value().toTensor().contiguous()});
  }
  return arrays;
}

}  // namespace ppstage
