// See include/ppstage/compile/compiled_stage.h.
#include "ppstage/compile/compiled_stage.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <torch/csrc/jit/api/module.h>

#include <iostream>
#include <sstream>
#include <unordered_map>

#include "ppstage/core/error.h"

namespace ppstage {

namespace {

// dtype, requires_grad, device and either the sizes (static shapes) or the number of
// dimensions (dynamic shapes) of every tensor input; the kind of everything else.
std::string signatureOf(const std::vector<c10::IValue>& args, bool dynamic) {
  std::ostringstream out;
  for (const c10::IValue& v : args) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      out << c10::toString(t.scalar_type());
      if (dynamic) {
        out << "[" << t.dim() << "d]";
      } else {
        out << t.sizes();
      }
      out << (t.requires_grad() ? "g" : "") << t.device() << ";";
    } else {
      out << v.tagKind() << ";";
    }
  }
  return out.str();
}

}  // namespace

CompileCache::Lookup CompileCache::runner(const std::string& structure,
                                          const std::string& signature,
                                          const std::shared_ptr<torch::jit::Graph>& graph,
                                          const std::string& name) {
  const std::string key = signature + "\n" + structure;
  const auto it = runners_.find(key);
  if (it != runners_.end()) {
    ++stats_.cache_hits;
    return {it->second.get(), false};
  }
  ++stats_.graphs_compiled;
  auto runner = std::make_unique<GraphRunner>(graph->copy(), name, /*profiling=*/true);
  GraphRunner* made = runner.get();
  runners_.emplace(key, std::move(runner));
  return {made, true};
}

void CompileCache::respecialized(const std::string& name, const std::string& signature) {
  ++stats_.respecializations;
  if (warned_ || stats_.respecializations <= max_respecializations_) return;
  warned_ = true;
  std::cerr << "ppstage: warning: [rank " << rank_ << "] " << stats_.respecializations
            << " re-specializations so far (" << name << " now sees inputs " << signature
            << "): input shapes keep changing and every new one is compiled again; keep "
               "shapes fixed, or try --compile.dynamic true"
            << std::endl;
}

namespace {

void countNodes(const torch::jit::Block* block, CompileStats& stats) {
  for (const torch::jit::Node* n : block->nodes()) {
    const std::string kind = n->kind().toQualString();
    if (kind == "prim::DifferentiableGraph") ++stats.differentiable_graphs;
    if (kind == "prim::FusionGroup" || kind == "prim::TensorExprGroup" ||
        kind == "prim::CudaFusionGroup" || kind == "prim::oneDNNFusionGroup") {
      ++stats.fusion_groups;
    }
    for (const torch::jit::Block* sub : n->blocks()) countNodes(sub, stats);
    if (n->hasAttribute(c10::attr::Subgraph)) {
      countNodes(n->g(c10::attr::Subgraph)->block(), stats);
    }
  }
}

}  // namespace

void CompileCache::countOptimizedGraphs() {
  stats_.fusion_groups = 0;
  stats_.differentiable_graphs = 0;
  for (const auto& [key, runner] : runners_) {
    if (const auto graph = runner->optimizedGraph()) countNodes(graph->block(), stats_);
  }
}

void setShapeStrategy(bool dynamic) {
  torch::jit::FusionStrategy strategy = {
      {dynamic ? torch::jit::FusionBehavior::DYNAMIC : torch::jit::FusionBehavior::STATIC, 2}};
  torch::jit::setFusionStrategy(strategy);
}

CompiledStage::CompiledStage(const std::shared_ptr<torch::jit::Graph>& graph, CompileCache& cache,
                             const std::string& name, std::vector<GraphSegment> segments)
    : graph_(graph), cache_(cache), name_(name), segments_(std::move(segments)) {
  if (cache.mode() == CompileMode::kNone) {
    simple_ = std::make_unique<GraphRunner>(graph->copy(), name, /*profiling=*/false);
  }
  if (cache.mode() == CompileMode::kBlock) {
    PPSTAGE_INTERNAL_ASSERT(!segments_.empty(), name, ": block mode needs the stage's segments");
    bindings_.resize(segments_.size());
  }
}

CompiledStage::~CompiledStage() = default;

GraphRunner& CompiledStage::bind(Binding& binding, const std::string& structure,
                                 const std::shared_ptr<torch::jit::Graph>& graph,
                                 const std::vector<c10::IValue>& args) {
  std::string signature = signatureOf(args, cache_.dynamicShapes());
  if (binding.runner != nullptr && signature == binding.signature) return *binding.runner;
  const CompileCache::Lookup found = cache_.runner(structure, signature, graph, name_);
  // Bound before and compiled again: the inputs changed (a shape, with static shapes).
  if (binding.runner != nullptr && found.compiled) cache_.respecialized(name_, signature);
  binding.runner = found.runner;
  binding.signature = std::move(signature);
  return *binding.runner;
}

std::vector<c10::IValue> CompiledStage::run(std::vector<c10::IValue> inputs) {
  switch (cache_.mode()) {
    case CompileMode::kNone: return simple_->run(std::move(inputs));
    case CompileMode::kStage:
      // The stage's own identity is the key: stages are never shared.
      return bind(whole_, name_, graph_, inputs).run(std::move(inputs));
    case CompileMode::kBlock: break;
  }
  std::unordered_map<const torch::jit::Value*, c10::IValue> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[graph_->inputs()[i]] = std::move(inputs[i]);
  auto value = [&](torch::jit::Value* v) -> c10::IValue {
    const auto it = env.find(v);
    if (it != env.end()) return it->second;
    const auto constant = torch::jit::toIValue(v);
    PPSTAGE_INTERNAL_ASSERT(constant.has_value(), name_, ": no value for '", v->debugName(), "'");
    return *constant;
  };
  for (size_t k = 0; k < segments_.size(); ++k) {
    const GraphSegment& seg = segments_[k];
    std::vector<c10::IValue> args;
    args.reserve(seg.inputs.size());
    for (torch::jit::Value* v : seg.inputs) args.push_back(value(v));
    std::vector<c10::IValue> outs = bind(bindings_[k], seg.structure, seg.graph, args).run(args);
    for (size_t i = 0; i < outs.size(); ++i) env[seg.outputs[i]] = std::move(outs[i]);
  }
  std::vector<c10::IValue> outputs;
  for (torch::jit::Value* v : graph_->outputs()) outputs.push_back(value(v));
  return outputs;
}

}  // namespace ppstage
