// See include/ppstage/compile/model_compiler.h.
#include "ppstage/compile/model_compiler.h"

#include "ppstage/compile/segments.h"
#include "ppstage/core/error.h"

namespace ppstage {

ModelCompiler::ModelCompiler(const CompileConfig& config, const ModelGraph& model, int rank)
    : model_(model),
      cache_(std::make_unique<CompileCache>(
          CompileCacheOptions{config.mode, rank, config.max_respecializations, config.dynamic})) {
  setShapeStrategy(config.dynamic);
  if (config.mode == CompileMode::kBlock) blocks_ = findBlocks(model, config.block_pattern);
}

std::unique_ptr<CompiledStage> ModelCompiler::compile(
    const std::shared_ptr<torch::jit::Graph>& graph, size_t num_inputs,
    const std::unordered_map<const torch::jit::Node*, int>& node_call, const std::string& name) {
  PPSTAGE_INTERNAL_ASSERT(cache_ != nullptr, "compiling '", name, "' after the cache was taken");
  std::vector<GraphSegment> segments;
  if (cache_->mode() == CompileMode::kBlock) {
    segments = segmentStage(*graph, node_call, model_, blocks_);
  }
  return std::make_unique<CompiledStage>(graph, num_inputs, *cache_, name, std::move(segments));
}

}  // namespace ppstage
