// See include/ppstage/checkpoint/export_model.h.
#include "ppstage/checkpoint/export_model.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/serialization/import.h>

#include <map>
#include <memory>

#include "ppstage/checkpoint/checkpoint_dir.h"
#include "ppstage/checkpoint/checkpoint_reader.h"
#include "ppstage/checkpoint/model_identity.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/graph/graph_runner.h"
#include "ppstage/models/model_source.h"
#include "ppstage/split/model_split.h"

namespace ppstage {
namespace {

// Module path -> the path the checkpoint stores it under (tied paths share one).
std::map<std::string, std::string> storedPaths(const ModelGraph& graph) {
  std::map<std::string, std::string> stored;
  for (size_t i = 0; i < graph.parameters.size(); ++i) {
    if (!graph.parameters[i].random_key) {
      stored[graph.parameters[i].path] = storedPath(graph, static_cast<int>(i));
    }
  }
  return stored;
}

// Every parameter and buffer of `module`, by name, with the checkpoint's tensor copied in.
void loadTensors(torch::jit::Module& module, const std::map<std::string, std::string>& stored,
                 CheckpointReader& reader, ExportResult& result) {
  at::NoGradGuard no_grad;
  auto load = [&](const std::string& name, at::Tensor tensor) {
    const auto it = stored.find(name);
    if (it == stored.end()) {
      result.untouched.push_back(name);
      return;
    }
    tensor.copy_(reader.tensor(it->second));
    ++result.tensors;
  };
  for (const auto& p : module.named_parameters(/*recurse=*/true)) load(p.name, p.value);
  for (const auto& b : module.named_buffers(/*recurse=*/true)) load(b.name, b.value);
}

// The split's stages, holding the checkpoint's tensors, chained on `input`: what the
// pipeline computes. Returns the last stage's first output.
at::Tensor chainStages(ModelSplit& split, CheckpointReader& reader, const at::Tensor& input) {
  at::NoGradGuard no_grad;
  std::vector<c10::IValue> values = {input};
  for (StageModule& stage : split.stages) {
    for (StageParameter& p : stage.parameters) {
      if (!p.random_key)
        p.value.copy_(reader.tensor(storedPath(split.graph, p.model_parameters[0])));
      values.emplace_back(p.value);
    }
    GraphRunner runner(stage.graph->copy(), "stage " + std::to_string(stage.index));
    values = runner.run(values);
  }
  return values.at(0).toTensor();
}

}  // namespace

ExportResult exportModel(const Config& config, const std::string& checkpoint_dir,
                         const std::string& out, const std::string& example_out) {
  std::vector<std::string> warnings;
  const auto found = findNewestCheckpoint(checkpoint_dir, warnings);
  PPSTAGE_CHECK(found.has_value(), "no complete checkpoint in --checkpoint.dir '", checkpoint_dir,
                "'", warnings.empty() ? "" : " (" + warnings.front() + ")");
  ExportResult result;
  result.checkpoint = found->dir;
  result.step = found->manifest.step;

  Config split_config = config;
  split_config.pipeline.stages = found->manifest.layout.stages;
  split_config.pipeline.split_points.clear();
  ModelSplit split = splitModel(split_config);
  checkSameModel(found->manifest, found->dir, split.graph);
  CheckpointReader reader(found->dir, found->manifest);

  LoadedModel fresh = loadModel(config.model, config.train);
  loadTensors(fresh.module, storedPaths(split.graph), reader, result);
  fresh.module.save(out);

  // The file as Python will see it: its tensors, and its forward.
  torch::jit::Module saved = torch::jit::load(out);
  for (const auto& p : saved.named_parameters(true)) {
    const auto stored = storedPaths(split.graph);
    const auto it = stored.find(p.name);
    PPSTAGE_CHECK(it == stored.end() || at::equal(p.value, reader.tensor(it->second)), "'", out,
                  "' does not hold the checkpoint's ", p.name);
  }
  if (!randomKeys(split.graph).empty()) return result;
  const at::Tensor expected = chainStages(split, reader, split.example_input);
  at::Tensor actual;
  {
    at::NoGradGuard no_grad;
    c10::IValue output = saved.forward({split.example_input});
    actual = output.isTuple() ? output.toTupleRef().elements().at(0).toTensor() : output.toTensor();
  }
  result.forward_checked = true;
  result.forward_max_abs_diff = (actual - expected).abs().max().item<double>();
  if (!example_out.empty()) {
    writeFileAtomically(example_out,
                        pickleTensors({{"input", split.example_input}, {"output", expected}}));
  }
  return result;
}

}  // namespace ppstage
