// See include/ppstage/checkpoint/model_identity.h.
#include "ppstage/checkpoint/model_identity.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <set>

#include "ppstage/checkpoint/sha256.h"
#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/graph/model_graph.h"

namespace ppstage {
namespace {

std::vector<int64_t> shapeOf(const at::Tensor& t) { return t.sizes().vec(); }

const SavedTensor* findTensor(const std::vector<SavedTensor>& tensors, const std::string& path) {
  const auto it = std::find_if(tensors.begin(), tensors.end(),
                               [&](const SavedTensor& t) { return t.path == path; });
  return it == tensors.end() ? nullptr : &*it;
}

}  // namespace

std::string storedPath(const ModelGraph& model, int index) {
  const ModelParameter& p = model.parameters.at(static_cast<size_t>(index));
  if (p.tie_group < 0) return p.path;
  const std::vector<int>& group = model.ties.at(static_cast<size_t>(p.tie_group));
  return model.parameters.at(static_cast<size_t>(*std::min_element(group.begin(), group.end())))
      .path;
}

at::ScalarType storedDtype(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? at::kFloat : t.scalar_type();
}

std::vector<SavedTensor> modelTensors(const ModelGraph& model) {
  std::vector<SavedTensor> tensors;
  std::set<std::string> seen;
  for (size_t i = 0; i < model.parameters.size(); ++i) {
    const ModelParameter& p = model.parameters[i];
    if (p.random_key) continue;
    const std::string path = storedPath(model, static_cast<int>(i));
    if (!seen.insert(path).second) continue;
    tensors.push_back(
        {path, shapeOf(p.value), dtypeName(storedDtype(p.value)), "", p.is_parameter, ""});
  }
  return tensors;
}

std::string modelHash(const ModelGraph& model) {
  std::string text = model.graph->toString(/*print_source_locations=*/false);
  for (const ModelParameter& p : model.parameters) {
    if (p.random_key) continue;
    text += detail::concat("\n", p.path, p.is_parameter ? " parameter " : " buffer ",
                           dtypeName(storedDtype(p.value)), " ", shapeText(shapeOf(p.value)));
  }
  return sha256Hex(text);
}

std::map<std::string, int64_t> randomKeys(const ModelGraph& model) {
  std::map<std::string, int64_t> keys;
  for (const ModelParameter& p : model.parameters) {
    if (p.random_key) keys[p.path] = p.value.item<int64_t>();
  }
  return keys;
}

void checkSameModel(const Manifest& manifest, const std::string& dir, const ModelGraph& model) {
  const std::string refused = "checkpoint " + dir + " is not of this model: ";
  const std::vector<SavedTensor> mine = modelTensors(model);
  for (const SavedTensor& t : mine) {
    const SavedTensor* saved = findTensor(manifest.tensors, t.path);
    PPSTAGE_CHECK(saved != nullptr, refused, t.path, ": the model has it, the checkpoint not");
    PPSTAGE_CHECK(saved->shape == t.shape, refused, t.path, ": checkpoint has ",
                  shapeText(saved->shape), ", model has ", shapeText(t.shape));
    PPSTAGE_CHECK(saved->dtype == t.dtype, refused, t.path, ": checkpoint has ", saved->dtype,
                  ", model has ", t.dtype);
  }
  for (const SavedTensor& saved : manifest.tensors) {
    PPSTAGE_CHECK(findTensor(mine, saved.path) != nullptr, refused, saved.path,
                  ": the checkpoint has it, the model not");
  }
  PPSTAGE_CHECK(manifest.random_keys == randomKeys(model), refused,
                "its random ops are keyed differently (another model, or another ppstage)");
  PPSTAGE_CHECK(manifest.model_hash == modelHash(model), refused,
                "the same tensors, but another graph (another --train.precision, or another ",
                "model; model hash ", manifest.model_hash.substr(0, 12), ", this model's ",
                modelHash(model).substr(0, 12), ")");
}

}  // namespace ppstage
