// compile::model_compiler: the one place a model's cuts are compiled, whether they are a
// rank's stages (train's plan) or the model's units run alone (the planner's measurement):
// one cache for them all in the run's compile mode and shape strategy, and in block mode
// (or with recomputation) the model's blocks found once and each cut segmented at them.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/compile/recompute_choice.h"
#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"

namespace ppstage {

class ModelCompiler {
 public:
  // Sets TorchScript's shape strategy (--compile.dynamic, process-wide) and, in block mode,
  // finds `model`'s blocks (findBlocks; throws ppstage::Error for a bad
  // --compile.block_pattern). `rank` names this rank in the cache's warnings. `model` must
  // outlive the compiler. With a recompute policy (--train.recompute and
  // --train.recompute_blocks), finds the blocks whatever the mode and resolves which
  // recompute (RecomputeChoice; throws ppstage::Error as it does).
  ModelCompiler(const CompileConfig& config, const ModelGraph& model, int rank = 0,
                RecomputePolicy recompute = RecomputePolicy::kNone,
                const std::string& recompute_blocks = "");

  // A cut of the model behind its compiled graph: `graph` takes `num_inputs` boundary
  // inputs, then parameters; `node_call` maps its top-level nodes to `model`'s calls
  // (StageModule::node_call). `name` appears in TorchScript's errors ("stage 2"); `stage`
  // is the cut's stage, for a count of recomputed blocks per stage.
  std::unique_ptr<CompiledStage> compile(
      const std::shared_ptr<torch::jit::Graph>& graph, size_t num_inputs,
      const std::unordered_map<const torch::jit::Node*, int>& node_call, const std::string& name,
      int stage = 0);

  RecomputePolicy recomputePolicy() const { return recompute_.policy(); }
  // The module paths of the blocks of a cut (as compile takes it) that recompute, in
  // execution order; none without a recompute policy, and under selective none whose ops
  // it all keeps.
  std::vector<std::string> recomputedBlocks(
      const torch::jit::Graph& graph, size_t num_inputs,
      const std::unordered_map<const torch::jit::Node*, int>& node_call, int stage) const;

  // The cache every compiled cut runs from, which must outlive them: taken by their owner
  // once the cuts are compiled.
  std::unique_ptr<CompileCache> takeCache() { return std::move(cache_); }

 private:
  // For each top-level node of `graph`, its outermost block (a call of model_) or -1; and
  // for each of those blocks whether it recomputes.
  struct CutBlocks {
    std::unordered_map<const torch::jit::Node*, int> owner;
    std::unordered_map<int, bool> recomputes;
    std::vector<int> order;  // the blocks, in execution order
  };
  bool passesTensorContainers(const GraphSegment& seg, const std::string& name);
  CutBlocks blocksOf(const torch::jit::Graph& graph,
                     const std::unordered_map<const torch::jit::Node*, int>& node_call,
                     int stage) const;

  const ModelGraph& model_;
  std::unique_ptr<CompileCache> cache_;
  CompileMode mode_;
  int rank_;
  std::set<std::string> warned_containers_;  // blocks said to run without recomputation
  std::vector<bool> blocks_;                 // block mode or recomputation: findBlocks over model_
  RecomputeChoice recompute_;
};

}  // namespace ppstage
