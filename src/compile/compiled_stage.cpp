// See include/ppstage/compile/compiled_stage.h.
#include "ppstage/compile/compiled_stage.h"

#include <torch/csrc/jit/codegen/fuser/interface.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <torch/csrc/jit/api/module.h>

#include <c10/core/GradMode.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "ppstage/compile/recompute.h"
#include "ppstage/compile/split_autodiff.h"
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

// How `args` enter autograd, when it records (grad mode on, a tensor requiring grad): a
// weight is a stage parameter, a stage graph input past its `num_inputs` boundary inputs.
std::optional<AutodiffInputs> autodiffInputs(const std::vector<c10::IValue>& args,
                                             const std::vector<torch::jit::Value*>& graph_inputs,
                                             const torch::jit::Graph& stage, size_t num_inputs) {
  if (!c10::GradMode::is_enabled()) return std::nullopt;
  AutodiffInputs autodiff;
  bool any = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool needs_grad = args[i].isTensor() && args[i].toTensor().requires_grad();
    const torch::jit::Value* v = graph_inputs.at(i);
    any = any || needs_grad;
    autodiff.requires_grad.push_back(needs_grad);
    autodiff.weight.push_back(v->node() == stage.param_node() && v->offset() >= num_inputs);
  }
  if (!any) return std::nullopt;
  return autodiff;
}

}  // namespace

CompileCache::Lookup CompileCache::runner(const std::string& structure,
                                          const std::string& signature,
                                          const std::shared_ptr<torch::jit::Graph>& graph,
                                          const std::string& name, const AutodiffInputs* autodiff) {
  const std::string key = signature + "\n" + structure;
  const auto it = runners_.find(key);
  if (it != runners_.end()) {
    ++stats_.cache_hits;
    return {it->second.get(), false};
  }
  ++stats_.graphs_compiled;
  stats_.specializations_per_graph =
      std::max(stats_.specializations_per_graph, ++specializations_[structure]);
  std::unique_ptr<GraphRunner> runner;
  if (autodiff != nullptr) {  // a simple executor over the regions, each optimized inside
    std::string eager_why;
    const std::shared_ptr<torch::jit::Graph> split = splitAutodiff(graph, *autodiff, &eager_why);
    split_graphs_ += countSplitGraphs(*split);
    if (!eager_why.empty() && !warned_eager_) {
      warned_eager_ = true;
      std::cerr << "ppstage: warning: [rank " << rank_ << "] " << name
                << ": a region TorchScript cannot differentiate runs with eager autograd ("
                << eager_why << ")" << std::endl;
    }
    runner = std::make_unique<GraphRunner>(split, name, /*profiling=*/false);
  } else {
    runner = std::make_unique<GraphRunner>(graph->copy(), name, /*profiling=*/true);
  }
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

bool fusesOnCpu() { return torch::jit::canFuseOnCPU(); }

void CompileCache::countOptimizedGraphs() {
  stats_.fusion_groups = 0;
  stats_.differentiable_graphs = split_graphs_;
  for (const auto& [key, runner] : runners_) {
    if (const auto graph = runner->optimizedGraph()) countNodes(graph->block(), stats_);
  }
}

void setShapeStrategy(bool dynamic) {
  torch::jit::FusionStrategy strategy = {
      {dynamic ? torch::jit::FusionBehavior::DYNAMIC : torch::jit::FusionBehavior::STATIC, 2}};
  torch::jit::setFusionStrategy(strategy);
}

CompiledStage::CompiledStage(const std::shared_ptr<torch::jit::Graph>& graph, size_t num_inputs,
                             CompileCache& cache, const std::string& name,
                             std::vector<GraphSegment> segments, std::vector<bool> recomputed)
    : graph_(graph),
      num_inputs_(num_inputs),
      cache_(cache),
      name_(name),
      segments_(std::move(segments)),
      recomputed_(std::move(recomputed)) {
  PPSTAGE_INTERNAL_ASSERT(recomputed_.empty() || recomputed_.size() == segments_.size(), name, ": ",
                          recomputed_.size(), " recompute flags for ", segments_.size(),
                          " segments");
  PPSTAGE_INTERNAL_ASSERT(cache.mode() != CompileMode::kBlock || !segments_.empty(), name,
                          ": block mode needs the stage's segments");
  if (cache.mode() == CompileMode::kNone) {
    if (segments_.empty()) {
      simple_ = std::make_unique<GraphRunner>(graph->copy(), name, /*profiling=*/false);
    }
    for (size_t k = 0; k < segments_.size(); ++k) {
      const bool rerun = !recomputed_.empty() && recomputed_[k];
      simple_segments_.push_back(rerun ? nullptr
                                       : std::make_unique<GraphRunner>(segments_[k].graph->copy(),
                                                                       name, /*profiling=*/false));
    }
  }
  bindings_.resize(segments_.size());
  reruns_.resize(segments_.size());
  for (size_t k = 0; k < recomputed_.size(); ++k) {
    if (!recomputed_[k]) continue;
    Rerun& rerun = reruns_[k];
    rerun.graph = inputPerReader(*segments_[k].graph);
    for (size_t source : rerun.graph.source) rerun.inputs.push_back(segments_[k].inputs[source]);
    if (cache.mode() == CompileMode::kNone) {
      rerun.simple = std::make_unique<GraphRunner>(rerun.graph.graph, name, /*profiling=*/false);
    }
  }
}

std::vector<std::string> CompiledStage::recomputedBlocks() const {
  std::vector<std::string> blocks;
  for (size_t k = 0; k < recomputed_.size(); ++k) {
    // Selective recomputation cuts a block into several recomputed segments: named once.
    if (recomputed_[k] && (blocks.empty() || blocks.back() != segments_[k].block)) {
      blocks.push_back(segments_[k].block);
    }
  }
  return blocks;
}

CompiledStage::~CompiledStage() = default;

GraphRunner& CompiledStage::bind(Binding& binding, const std::string& structure,
                                 const std::shared_ptr<torch::jit::Graph>& graph,
                                 const std::vector<c10::IValue>& args,
                                 const std::vector<torch::jit::Value*>& graph_inputs) {
  std::string signature = signatureOf(args, cache_.dynamicShapes());
  const std::optional<AutodiffInputs> autodiff =
      autodiffInputs(args, graph_inputs, *graph_, num_inputs_);
  if (autodiff) {  // which inputs are weights decides the cut: part of the key
    std::string weights = "autodiff weights ";
    for (const bool w : autodiff->weight) weights += w ? '1' : '0';
    signature = weights + ";" + signature;
  }
  if (binding.runner != nullptr && signature == binding.signature) return *binding.runner;
  const CompileCache::Lookup found =
      cache_.runner(structure, signature, graph, name_, autodiff ? &*autodiff : nullptr);
  // Bound before and compiled again: the inputs changed (a shape, with static shapes).
  if (binding.runner != nullptr && found.compiled) cache_.respecialized(name_, signature);
  binding.runner = found.runner;
  binding.signature = std::move(signature);
  return *binding.runner;
}

std::vector<c10::IValue> CompiledStage::runSegmentGraph(size_t k, std::vector<c10::IValue> args) {
  const GraphSegment& seg = segments_[k];
  if (cache_.mode() == CompileMode::kNone) return simple_segments_[k]->run(std::move(args));
  // Stage mode: the stage's own identity and the segment's index are the key (stages are
  // never shared); block mode: the segment's structure, shared by identical blocks.
  const std::string structure = cache_.mode() == CompileMode::kStage
                                    ? name_ + " segment " + std::to_string(k)
                                    : seg.structure;
  return bind(bindings_[k], structure, seg.graph, args, seg.inputs).run(std::move(args));
}

std::vector<c10::IValue> CompiledStage::runRerunGraph(size_t k, std::vector<c10::IValue> args) {
  Rerun& rerun = reruns_[k];
  if (cache_.mode() == CompileMode::kNone) return rerun.simple->run(std::move(args));
  const std::string structure = cache_.mode() == CompileMode::kStage
                                    ? name_ + " rerun " + std::to_string(k)
                                    : rerun.graph.structure;
  return bind(rerun.binding, structure, rerun.graph.graph, args, rerun.inputs).run(std::move(args));
}

std::vector<c10::IValue> CompiledStage::runSegment(size_t k, std::vector<c10::IValue> args) {
  if (recomputed_.empty() || !recomputed_[k]) return runSegmentGraph(k, std::move(args));
  // Forward and reruns alike run the graph with an input per reader, on one executor.
  const auto run = [this, k](std::vector<c10::IValue> a) { return runRerunGraph(k, std::move(a)); };
  return runRecomputed(args, RecomputedSegment{run, reruns_[k].graph.source}, segments_[k].block,
                       cache_.recomputeStats(), cache_.trace());
}

std::vector<c10::IValue> CompiledStage::run(std::vector<c10::IValue> inputs) {
  if (segments_.empty()) {
    if (cache_.mode() == CompileMode::kNone) return simple_->run(std::move(inputs));
    // The stage's own identity is the key: stages are never shared.
    return bind(whole_, name_, graph_, inputs, graph_->inputs().vec()).run(std::move(inputs));
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
    std::vector<c10::IValue> outs = runSegment(k, std::move(args));
    for (size_t i = 0; i < outs.size(); ++i) env[seg.outputs[i]] = std::move(outs[i]);
  }
  std::vector<c10::IValue> outputs;
  for (torch::jit::Value* v : graph_->outputs()) outputs.push_back(value(v));
  return outputs;
}

}  // namespace ppstage
