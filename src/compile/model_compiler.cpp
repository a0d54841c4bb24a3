// See include/ppstage/compile/model_compiler.h.
#include "ppstage/compile/model_compiler.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <iostream>

#include "ppstage/compile/segments.h"
#include "ppstage/core/error.h"

namespace ppstage {

namespace {

// Selective recomputation keeps the outputs of these ops (include/ppstage/compile/
// recompute.h): the block is cut again around each into segments of its own that run as
// usual, and the runs of ops between them recompute.
bool isHeavyOp(c10::Symbol kind) {
  static const std::vector<std::string> kinds = {"aten::linear",
                                                 "aten::addmm",
                                                 "aten::conv1d",
                                                 "aten::conv2d",
                                                 "aten::conv3d",
                                                 "aten::convolution",
                                                 "aten::_convolution",
                                                 "aten::conv_transpose1d",
                                                 "aten::conv_transpose2d",
                                                 "aten::conv_transpose3d",
                                                 "aten::scaled_dot_product_attention"};
  const std::string name = kind.toQualString();
  return std::find(kinds.begin(), kinds.end(), name) != kinds.end();
}

// Whether `v` is one of the stage's parameters (a graph input past the boundary inputs),
// maybe seen through a transpose or a view.
bool isWeight(const torch::jit::Value* v, const torch::jit::Graph& graph, size_t num_inputs) {
  for (int depth = 0; depth < 4; ++depth) {
    const torch::jit::Node* def = v->node();
    if (def == graph.param_node()) return v->offset() >= num_inputs;
    const std::string kind = def->kind().toQualString();
    if (kind != "aten::t" && kind != "aten::transpose" && kind != "aten::permute" &&
        kind != "aten::view" && kind != "aten::reshape" && kind != "aten::to" &&
        kind != "aten::contiguous") {
      return false;
    }
    v = def->input(0);
  }
  return false;
}

// A matrix product with a weight, a convolution or an attention kernel: what selective
// recomputation keeps. A product of two activations (attention's scores) is recomputed.
bool keptBySelective(const torch::jit::Node* n, const torch::jit::Graph& graph, size_t num_inputs) {
  if (isHeavyOp(n->kind())) return true;
  const std::string kind = n->kind().toQualString();
  if (kind != "aten::matmul" && kind != "aten::mm" && kind != "aten::bmm" &&
      kind != "aten::einsum" && kind != "aten::baddbmm") {
    return false;
  }
  for (const torch::jit::Value* in : n->inputs()) {
    if (isWeight(in, graph, num_inputs)) return true;
  }
  return false;
}

// The outermost block holding `call` (itself included), or -1.
int outermostBlock(const ModelGraph& model, const std::vector<bool>& blocks, int call) {
  int found = -1;
  for (int c = call; c >= 0; c = model.calls[static_cast<size_t>(c)].parent) {
    if (blocks[static_cast<size_t>(c)]) found = c;
  }
  return found;
}

// A selectively recomputed block's kept ops get their block's path with this suffix as
// their label, so that each forms a segment of its own between the recomputed runs.
constexpr char kKeptSuffix[] = "\tkept";

// Whether `type` holds tensors without being one (a list or a tuple of them).
bool holdsTensors(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return false;
  if (const auto optional = type->cast<c10::OptionalType>()) {
    return holdsTensors(optional->getElementType());  // a tensor or None: as a tensor
  }
  for (const c10::TypePtr& inner : type->containedTypes()) {
    if (inner->kind() == c10::TypeKind::TensorType || holdsTensors(inner)) return true;
  }
  return false;
}

}  // namespace

ModelCompiler::ModelCompiler(const CompileConfig& config, const ModelGraph& model, int rank,
                             RecomputePolicy recompute, const std::string& recompute_blocks)
    : model_(model),
      cache_(std::make_unique<CompileCache>(
          CompileCacheOptions{config.mode, rank, config.max_respecializations, config.dynamic})),
      mode_(config.mode),
      rank_(rank) {
  setShapeStrategy(config.dynamic);
  if (config.mode == CompileMode::kBlock || recompute != RecomputePolicy::kNone) {
    blocks_ = findBlocks(model, config.block_pattern);
  }
  PPSTAGE_CHECK(recompute == RecomputePolicy::kNone || config.block_pattern.empty() ||
                    std::find(blocks_.begin(), blocks_.end(), true) != blocks_.end(),
                "--train.recompute ", toString(recompute), ": --compile.block_pattern '",
                config.block_pattern, "' matches no module call: no blocks to recompute");
  recompute_ = RecomputeChoice(recompute, recompute_blocks, model, blocks_);
}

// A segment that passes tensors inside a list or a tuple across its boundary: a recompute
// node would not see their gradients, so it runs without recomputation, and says so once.
bool ModelCompiler::passesTensorContainers(const GraphSegment& seg, const std::string& name) {
  const auto holds = [](const torch::jit::Value* v) { return holdsTensors(v->type()); };
  const bool passes = std::any_of(seg.graph->inputs().begin(), seg.graph->inputs().end(), holds) ||
                      std::any_of(seg.graph->outputs().begin(), seg.graph->outputs().end(), holds);
  if (passes && warned_containers_.insert(seg.block).second) {
    std::cerr << "ppstage: warning: [rank " << rank_ << "] " << name << ": " << seg.block
              << " passes tensors inside a list or a tuple across its boundary; it runs "
                 "without recomputation"
              << std::endl;
  }
  return passes;
}

ModelCompiler::CutBlocks ModelCompiler::blocksOf(
    const torch::jit::Graph& graph,
    const std::unordered_map<const torch::jit::Node*, int>& node_call, int stage) const {
  CutBlocks cut;
  for (const torch::jit::Node* n : graph.nodes()) {
    const auto it = node_call.find(n);
    const int block = it == node_call.end() ? -1 : outermostBlock(model_, blocks_, it->second);
    cut.owner[n] = block;
    if (block < 0 || cut.recomputes.count(block) > 0) continue;
    const int index = static_cast<int>(cut.order.size());
    cut.recomputes[block] = recompute_.recomputes(block, stage, index);
    cut.order.push_back(block);
  }
  return cut;
}

std::vector<std::string> ModelCompiler::recomputedBlocks(
    const torch::jit::Graph& graph, size_t num_inputs,
    const std::unordered_map<const torch::jit::Node*, int>& node_call, int stage) const {
  std::vector<std::string> paths;
  if (!recompute_.any()) return paths;
  const CutBlocks cut = blocksOf(graph, node_call, stage);
  const bool selective = recompute_.policy() == RecomputePolicy::kSelective;
  const auto reruns_an_op = [&](int block) {
    for (const torch::jit::Node* n : graph.nodes()) {
      if (cut.owner.at(n) != block || n->kind() == c10::prim::Constant) continue;
      if (!keptBySelective(n, graph, num_inputs)) return true;
    }
    return false;
  };
  for (int block : cut.order) {
    if (!cut.recomputes.at(block) || (selective && !reruns_an_op(block))) continue;
    paths.push_back(model_.calls[static_cast<size_t>(block)].path);
  }
  return paths;
}

std::unique_ptr<CompiledStage> ModelCompiler::compile(
    const std::shared_ptr<torch::jit::Graph>& graph, size_t num_inputs,
    const std::unordered_map<const torch::jit::Node*, int>& node_call, const std::string& name,
    int stage) {
  PPSTAGE_INTERNAL_ASSERT(cache_ != nullptr, "compiling '", name, "' after the cache was taken");
  if (!recompute_.any()) {
    std::vector<GraphSegment> segments;
    if (mode_ == CompileMode::kBlock) segments = segmentStage(*graph, node_call, model_, blocks_);
    return std::make_unique<CompiledStage>(graph, num_inputs, *cache_, name, std::move(segments));
  }
  const CutBlocks cut = blocksOf(*graph, node_call, stage);
  const bool selective = recompute_.policy() == RecomputePolicy::kSelective;
  // Segments: every block in block mode, only the recomputed ones otherwise; a selectively
  // recomputed block cut again around the ops it keeps.
  std::vector<GraphSegment> segments = cutIntoRuns(*graph, [&](torch::jit::Node* n) {
    const int block = cut.owner.at(n);
    if (block < 0) return std::string();
    const std::string& path = model_.calls[static_cast<size_t>(block)].path;
    if (!cut.recomputes.at(block)) return mode_ == CompileMode::kBlock ? path : std::string();
    if (selective && keptBySelective(n, *graph, num_inputs)) return path + kKeptSuffix;
    return path;
  });
  std::vector<bool> recomputed;
  for (GraphSegment& seg : segments) {
    const size_t kept = seg.block.find(kKeptSuffix);
    if (kept != std::string::npos) seg.block.resize(kept);
    const bool is_recomputed_block =
        !seg.block.empty() && kept == std::string::npos &&
        std::any_of(cut.recomputes.begin(), cut.recomputes.end(), [&](const auto& entry) {
          return entry.second && model_.calls[static_cast<size_t>(entry.first)].path == seg.block;
        });
    recomputed.push_back(is_recomputed_block && !passesTensorContainers(seg, name));
  }
  return std::make_unique<CompiledStage>(graph, num_inputs, *cache_, name, std::move(segments),
                                         std::move(recomputed));
}

}  // namespace ppstage
