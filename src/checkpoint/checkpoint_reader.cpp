// See include/ppstage/checkpoint/checkpoint_reader.h.
#include "ppstage/checkpoint/checkpoint_reader.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>

#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/torch_save.h"

namespace ppstage {
namespace {

c10::Dict<std::string, at::Tensor> toDict(const TensorDict& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [path, tensor] : tensors) dict.insert(path, tensor.detach().contiguous());
  return dict;
}

}  // namespace

std::string pickleTensors(const TensorDict& tensors) { return torchSaveBytes(toDict(tensors)); }

std::string pickleStates(const StateDict& states) {
  c10::Dict<std::string, c10::Dict<std::string, at::Tensor>> dict;
  for (const auto& [path, state] : states) dict.insert(path, toDict(state));
  return torchSaveBytes(dict);
}

CheckpointReader::CheckpointReader(std::string dir, Manifest manifest)
    : dir_(std::move(dir)), manifest_(std::move(manifest)) {}

const SavedTensor& CheckpointReader::entry(const std::string& path) const {
  const auto it = std::find_if(manifest_.tensors.begin(), manifest_.tensors.end(),
                               [&](const SavedTensor& t) { return t.path == path; });
  PPSTAGE_CHECK(it != manifest_.tensors.end(), "checkpoint ", dir_, " has no tensor '", path, "'");
  return *it;
}

const c10::IValue& CheckpointReader::file(const std::string& name) {
  auto it = files_.find(name);
  if (it != files_.end()) return it->second;
  const std::string path = dir_ + "/" + name;
  const std::string bytes = readFile(path, "checkpoint file");
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    PPSTAGE_FAIL("cannot read checkpoint file '", path, "': ", e.what_without_backtrace());
  }
  PPSTAGE_CHECK(value.isGenericDict(), "checkpoint file '", path, "' is not a dictionary");
  return files_.emplace(name, std::move(value)).first->second;
}

at::Tensor CheckpointReader::tensor(const std::string& path) {
  const SavedTensor& saved = entry(path);
  const c10::impl::GenericDict dict = file(saved.file).toGenericDict();
  const auto it = dict.find(path);
  PPSTAGE_CHECK(it != dict.end(), "checkpoint file '", dir_, "/", saved.file, "' lacks '", path,
                "'");
  return it->value().toTensor();
}

TensorDict CheckpointReader::optimizerState(const std::string& path) {
  const SavedTensor& saved = entry(path);
  TensorDict state;
  if (saved.optimizer_file.empty()) return state;
  const c10::impl::GenericDict dict = file(saved.optimizer_file).toGenericDict();
  const auto it = dict.find(path);
  if (it == dict.end()) return state;
  for (const auto& item : it->value().toGenericDict()) {
    state[item.key().toStringRef()] = item.value().toTensor();
  }
  return state;
}

}  // namespace ppstage
