// compile::model_compiler: the one place a model's cuts are compiled, whether they are a
// rank's stages (train's plan) or the model's units run alone (the planner's measurement):
// one cache for them all in the run's compile mode and shape strategy, and in block mode
// the model's blocks found once and each cut segmented at them.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"

namespace ppstage {

class ModelCompiler {
 public:
  // Sets TorchScript's shape strategy (--compile.dynamic, process-wide) and, in block mode,
  // finds `model`'s blocks (findBlocks; throws ppstage::Error for a bad
  // --compile.block_pattern). `rank` names this rank in the cache's warnings. `model` must
  // outlive the compiler.
  ModelCompiler(const CompileConfig& config, const ModelGraph& model, int rank = 0);

  // A cut of the model behind its compiled graph: `graph` takes `num_inputs` boundary
  // inputs, then parameters; `node_call` maps its top-level nodes to `model`'s calls
  // (StageModule::node_call). `name` appears in TorchScript's errors ("stage 2").
  std::unique_ptr<CompiledStage> compile(
      const std::shared_ptr<torch::jit::Graph>& graph, size_t num_inputs,
      const std::unordered_map<const torch::jit::Node*, int>& node_call, const std::string& name);

  // The cache every compiled cut runs from, which must outlive them: taken by their owner
  // once the cuts are compiled.
  std::unique_ptr<CompileCache> takeCache() { return std::move(cache_); }

 private:
  const ModelGraph& model_;
  std::unique_ptr<CompileCache> cache_;
  std::vector<bool> blocks_;  // block mode: findBlocks over model_
};

}  // namespace ppstage
