// See include/ppstage/checkpoint/export_model.h.
#include "ppstage/checkpoint/export_model.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "ppstage/checkpoint/checkpoint_dir.h"
#include "ppstage/checkpoint/checkpoint_reader.h"
#include "ppstage/checkpoint/model_identity.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/graph_runner.h"
#include "ppstage/models/model_source.h"
#include "ppstage/split/model_split.h"

namespace ppstage {
namespace {

// Relative to the output's largest magnitude (at least 1): the file and the stages run the
// same ops, so anything beyond float reassociation is a bug.
constexpr double kForwardTolerance = 1e-5;

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
at::Tensor chainStages(ModelSplit& split, CheckpointReader& reader,
                       const std::vector<at::Tensor>& inputs) {
  at::NoGradGuard no_grad;
  std::vector<c10::IValue> values(inputs.begin(), inputs.end());
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

// The split the checkpoint was saved with: its stage count and, as split points, the first
// unit of every stage after the first.
Config savedSplit(const Config& config, const SavedLayout& layout) {
  Config split_config = config;
  split_config.pipeline.stages = layout.stages;
  split_config.pipeline.split_points.clear();
  for (size_t s = 1; s < layout.stage_modules.size(); ++s) {
    if (!layout.stage_modules[s].empty()) {
      split_config.pipeline.split_points.push_back(layout.stage_modules[s].front());
    }
  }
  if (split_config.pipeline.split_points.size() + 1 != static_cast<size_t>(layout.stages)) {
    split_config.pipeline.split_points.clear();  // balance again: any split computes the same
    split_config.pipeline.balance = Balance::kParams;
  }
  return split_config;
}

// The file as Python will see it holds the checkpoint's tensors.
void checkSavedTensors(const torch::jit::Module& saved, const std::string& out,
                       const std::map<std::string, std::string>& stored, CheckpointReader& reader) {
  auto check = [&](const std::string& name, const at::Tensor& value) {
    const auto it = stored.find(name);
    PPSTAGE_CHECK(it == stored.end() || at::equal(value, reader.tensor(it->second)), "'", out,
                  "' does not hold the checkpoint's ", name);
  };
  for (const auto& p : saved.named_parameters(true)) check(p.name, p.value);
  for (const auto& b : saved.named_buffers(true)) check(b.name, b.value);
}

// The saved file's forward on the split's example inputs, passed by name: its first output.
at::Tensor savedForward(const torch::jit::Module& saved, const ModelSplit& split) {
  at::NoGradGuard no_grad;
  torch::jit::Kwargs by_name;  // forward's arguments not fed keep their defaults
  for (size_t i = 0; i < split.example_inputs.size(); ++i) {
    by_name.emplace(split.graph.input_names.at(i), split.example_inputs[i]);
  }
  return firstModelOutput(saved.get_method("forward")({}, by_name));
}

// Writes the example input and `expected` output as pickled tensors to `example_out`.
void writeExample(const std::string& example_out, const ModelSplit& split,
                  const at::Tensor& expected) {
  // "input" is the first input; with several, each also goes under "input.<argument>".
  TensorDict example{{"input", split.example_inputs.at(0)}, {"output", expected}};
  for (size_t i = 0; split.example_inputs.size() > 1 && i < split.example_inputs.size(); ++i) {
    example.emplace("input." + split.graph.input_names.at(i), split.example_inputs[i]);
  }
  writeFileAtomically(example_out, pickleTensors(example));
}

}  // namespace

ExportResult exportModel(const Config& config, const std::string& checkpoint_dir,
                         const std::string& out, const std::string& example_out,
                         const InputSpec* data_input) {
  std::vector<std::string> warnings;
  const auto found = findNewestCheckpoint(checkpoint_dir, warnings);
  PPSTAGE_CHECK(found.has_value(), "no complete checkpoint in --checkpoint.dir '", checkpoint_dir,
                "'", warnings.empty() ? "" : " (" + warnings.front() + ")");
  ExportResult result;
  result.checkpoint = found->dir;
  result.step = found->manifest.step;

  // The model first: a checkpoint of another model (or of other model options) is refused as
  // such, not by the split its layout asks for.
  const Config saved_split = savedSplit(config, found->manifest.layout);
  CapturedModel captured = captureForSplit(saved_split, data_input);
  try {
    checkSameModel(found->manifest, found->dir, captured.graph);
  } catch (const Error& e) {
    throw Error(detail::concat(e.what(), " (its manifest names model '", found->manifest.model,
                               "', this is --model.name '", config.model.name,
                               "' with the model options given): give export the run's model ",
                               "options, or its --config"));
  }
  if (captured.compute_dtype != at::kFloat) {  // the exported model and its check are fp32
    Config fp32 = saved_split;
    fp32.train.precision = Precision::kFp32;
    captured = captureForSplit(fp32, data_input);
  }
  ModelSplit split = splitCaptured(std::move(captured), saved_split.pipeline);
  CheckpointReader reader(found->dir, found->manifest);
  const std::map<std::string, std::string> stored = storedPaths(split.graph);

  LoadedModel fresh = loadModel(config.model, config.train);
  loadTensors(fresh.module, stored, reader, result);
  const std::string temp = out + ".tmp-export";
  fresh.module.save(temp);
  PPSTAGE_CHECK(std::rename(temp.c_str(), out.c_str()) == 0, "cannot write --out '", out, "'");

  torch::jit::Module saved = torch::jit::load(out);
  checkSavedTensors(saved, out, stored, reader);
  if (!randomKeys(split.graph).empty()) return result;  // draws differ by design
  const at::Tensor expected = chainStages(split, reader, split.example_inputs);
  const at::Tensor actual = savedForward(saved, split);
  result.forward_checked = true;
  result.forward_max_abs_diff = (actual - expected).abs().max().item<double>();
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  PPSTAGE_CHECK(result.forward_max_abs_diff <= kForwardTolerance * scale, "the forward of '", out,
                "' differs from the checkpoint's stages chained by ", result.forward_max_abs_diff,
                " on the example input");
  if (!example_out.empty()) writeExample(example_out, split, expected);
  return result;
}

}  // namespace ppstage
