// See include/ppstage/observe/parameter_files.h.
#include "ppstage/observe/parameter_files.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/torch_save.h"

namespace ppstage {

void writeParameterFile(const std::string& dir, int rank,
                        const std::map<std::string, at::Tensor>& params) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  PPSTAGE_CHECK(!ec, "cannot create --output.params_dir '", dir, "': ", ec.message());
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [path, tensor] : params) dict.insert(path, tensor.detach().contiguous());
  writeFileAtomically(dir + "/params-rank" + std::to_string(rank) + ".pt",
                      torchSaveBytes(c10::IValue(dict)));
}

std::map<std::string, at::Tensor> readParameterFiles(const std::string& dir) {
  std::map<std::string, at::Tensor> params;
  std::error_code ec;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("params-rank", 0) != 0 || entry.path().extension() != ".pt") continue;
    std::ifstream file(entry.path(), std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                  std::istreambuf_iterator<char>());
    const c10::IValue value = torch::jit::pickle_load(bytes);
    PPSTAGE_CHECK(value.isGenericDict(), entry.path().string(), " is not a parameter file");
    for (const auto& item : value.toGenericDict()) {
      const std::string key = item.key().toStringRef();
      const at::Tensor tensor = item.value().toTensor();
      const auto [it, inserted] = params.emplace(key, tensor);
      PPSTAGE_CHECK(inserted || at::equal(it->second, tensor), "two files in '", dir,
                    "' hold different values of '", key, "'");
    }
    ++files;
  }
  PPSTAGE_CHECK(!ec && files > 0, "no params-rank*.pt files in '", dir, "'",
                ec ? ": " + ec.message() : std::string());
  return params;
}

}  // namespace ppstage
