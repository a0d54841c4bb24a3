// split::extract: StagePartition -> one self-contained StageModule per stage (stage_module.h).
//
// For every stage, first find what it reads from outside (findUses()), then which tensors
// cross each cut (findCrossings()), then copy its nodes into a graph of its own
// (buildStage()).
//
// Note [Values crossing a cut]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A stage may use a value made by an earlier stage. Tensors cross the cut (forwarded through
// every stage in between). Anything else is recomputed inside the using stage from its
// producing chain, which must consist of side-effect-free ops ending in:
//   - constants, copied;
//   - metadata reads (aten::size, aten::dim, prim::dtype, ...): an int or List[int] result
//     is computed where its tensor lives and crosses as a small int64 tensor (packed with
//     prim::NumToTensor / aten::tensor, unpacked with aten::Int / prim::tolist), so that
//     Hugging Face's `output_shape = input_shape + [hidden.size(-1)]` costs a few bytes,
//     not a forwarded activation; other metadata (a device) makes its tensor cross;
//   - tensors only packed into a list or tuple: those tensors cross.
// Size arithmetic done on 0-dim tensors (what torch.jit.trace records: prim::NumToTensor ...
// aten::Int) counts as metadata too. A value that depends on tensor *data* (aten::Int of a
// real tensor, .item(), .tolist()) cannot be recomputed from metadata and is rejected: the
// user moves the split point.
#include "ppstage/split/stage_module.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

#include "ppstage/core/error.h"

namespace ppstage {

using torch::jit::Node;
using torch::jit::Value;
namespace aten = c10::aten;
namespace prim = c10::prim;

int64_t StageModule::numParams(const ModelGraph& model) const {
  int64_t total = 0;
  for (const StageParameter& p : parameters) {
    if (p.is_parameter) total += model.parameters.at(p.model_parameters.at(0)).value.numel();
  }
  return total;
}

std::vector<c10::IValue> StageModule::arguments(const std::vector<at::Tensor>& values) const {
  std::vector<c10::IValue> args(values.begin(), values.end());
  args.reserve(values.size() + parameters.size());
  for (const StageParameter& p : parameters) args.emplace_back(p.value);
  return args;
}

namespace {

constexpr int kModelInputStage = -1;

bool isTensor(const Value* v) { return v->type()->isSubtypeOf(*c10::TensorType::get()); }

bool readsOnlyMetadata(const Node* n) {
  // By name: some of these symbols exist only in newer LibTorch.
  static const std::set<c10::Symbol> kinds = [] {
    std::set<c10::Symbol> symbols;
    for (const char* name :
         {"aten::size", "aten::dim", "aten::numel", "aten::len", "prim::dtype", "prim::device",
          "prim::layout", "aten::is_floating_point", "aten::sym_size", "aten::sym_numel"}) {
      symbols.insert(c10::Symbol::fromQualString(name));
    }
    return symbols;
  }();
  return kinds.count(n->kind()) > 0;
}

// An int or List[int]: crosses a cut packed into an int64 tensor.
bool isPackable(const Value* v) {
  return v->type()->kind() == c10::TypeKind::IntType ||
         v->type()->isSubtypeOf(*c10::ListType::ofInts());
}

Value* packMetadata(torch::jit::Graph& g, Value* v) {
  if (v->type()->kind() == c10::TypeKind::IntType) return g.insert(prim::NumToTensor, {v});
  return g.insert(aten::tensor, {v});
}

Value* unpackMetadata(torch::jit::Graph& g, Value* t, const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::IntType) return g.insert(aten::Int, {t});
  // prim::tolist(tensor, dim, elem_ty) with elem_ty 0 = int; its result type is set by hand.
  Node* to_list =
      g.insertNode(g.create(prim::tolist, {t, g.insertConstant(1), g.insertConstant(0)}, 1));
  to_list->output()->setType(c10::ListType::ofInts());
  return to_list->output();
}

bool packsValues(const Node* n) {
  return n->kind() == prim::ListConstruct || n->kind() == prim::TupleConstruct;
}

// True when `n` writes to one of its inputs, or when one of its list outputs is written to
// later (then a recomputed copy would miss the writes).
bool involvesMutation(const Node* n) {
  if (const c10::FunctionSchema* schema = n->maybeSchema()) {
    if (schema->is_mutable()) return true;
  }
  for (const Value* out : n->outputs()) {
    for (const torch::jit::Use& use : out->uses()) {
      const c10::FunctionSchema* schema = use.user->maybeSchema();
      if (schema == nullptr || use.offset >= schema->arguments().size()) continue;
      const auto* alias = schema->arguments()[use.offset].alias_info();
      if (alias != nullptr && alias->isWrite()) return true;
    }
  }
  return false;
}

struct StageUses {
  // Tensors from earlier stages or the model input, and ints / int lists read from tensor
  // metadata in earlier stages (they cross packed, see Note [Values crossing a cut]).
  std::set<Value*> received;
  std::set<Node*> recomputed;   // nodes of earlier stages copied into this one
  std::vector<int> parameters;  // ModelGraph::parameters indices, in order of first use
};

class StageExtractor {
 public:
  StageExtractor(const ModelGraph& model, const StagePartition& plan, const ValueShapes& shapes)
      : model_(model),
        plan_(plan),
        shapes_(shapes),
        graph_(*model.graph),
        nodes_(topLevelNodes(model)) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      index_[nodes_[i]] = i;
      stage_of_node_.push_back(static_cast<int>(plan.stageOfNode(i)));
    }
  }

  std::vector<StageModule> run() {
    const size_t S = plan_.numStages();
    uses_.assign(S, StageUses{});
    for (size_t s = 0; s < S; ++s) findUses(static_cast<int>(s));
    checkWrittenBuffersStayInOneStage();
    findCrossings();
    std::vector<StageModule> stages;
    for (size_t s = 0; s < S; ++s) stages.push_back(buildStage(static_cast<int>(s)));
    return stages;
  }

 private:
  // --- what each stage reads from outside --------------------------------------------

  void findUses(int s) {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (stage_of_node_[i] == s) useInputsOf(nodes_[i], nodes_[i], s);
    }
    if (s + 1 == static_cast<int>(plan_.numStages())) {
      for (Value* out : graph_.outputs()) use(out, s, nullptr);
    }
  }

  // Visits the inputs of `n` and of every node nested in it that come from outside `top`.
  void useInputsOf(Node* n, Node* top, int s) {
    for (Value* v : n->inputs()) {
      if (isGraphInput(v) || topLevelOwner(v->node()) != top) use(v, s, top);
    }
    for (torch::jit::Block* block : n->blocks()) {
      for (Node* inner : block->nodes()) useInputsOf(inner, top, s);
      useInputsOf(block->return_node(), top, s);
    }
  }

  void use(Value* v, int s, Node* user) {
    if (isGraphInput(v)) {
      if (isModelInput(v)) {
        uses_[s].received.insert(v);
      } else {
        addParameter(s, static_cast<int>(v->offset() - model_.numInputs()));
      }
      return;
    }
    if (producerStage(v) == s) return;
    if (v->node()->kind() == prim::Constant) {
      uses_[s].recomputed.insert(v->node());
    } else if (isTensor(v) && !isShapeTensor(v)) {
      uses_[s].received.insert(v);
    } else {
      recompute(v, s, v, user);
    }
  }

  void addParameter(int s, int parameter) {
    auto& list = uses_[s].parameters;
    if (std::find(list.begin(), list.end(), parameter) == list.end()) list.push_back(parameter);
  }

  // See Note [Values crossing a cut].
  void recompute(Value* v, int s, Value* crossing, Node* user) {
    Node* n = v->node();
    if (uses_[s].recomputed.count(n)) return;
    if (n->kind() != prim::Constant) {
      PPSTAGE_CHECK(n->blocks().empty(), cannotCross(crossing, s, user, n,
                                                     "it comes out of "
                                                     "control flow"));
      PPSTAGE_CHECK(!n->hasSideEffects(), cannotCross(crossing, s, user, n,
                                                      "it comes from an "
                                                      "op with side effects"));
      PPSTAGE_CHECK(!involvesMutation(n), cannotCross(crossing, s, user, n,
                                                      "it is modified in "
                                                      "place, and a copy would miss the change"));
    }
    if (readsOnlyMetadata(n) && isPackable(v)) {
      uses_[s].received.insert(v);
      return;
    }
    if (n->kind() != prim::Constant) {
      for (Value* u : n->inputs()) recomputeInput(u, n, s, crossing, user);
    }
    uses_[s].recomputed.insert(n);
  }

  void recomputeInput(Value* u, Node* n, int s, Value* crossing, Node* user) {
    const bool tensor_leaf = isTensor(u) && !isShapeTensor(u);
    if (isGraphInput(u) && !isModelInput(u)) {
      const std::string& path = model_.parameters[u->offset() - model_.numInputs()].path;
      PPSTAGE_FAIL(
          cannotCross(crossing, s, user, n, "it is computed from parameter '" + path + "'"));
    }
    if (!tensor_leaf) {
      recompute(u, s, crossing, user);
      return;
    }
    PPSTAGE_CHECK(readsOnlyMetadata(n) || packsValues(n),
                  cannotCross(crossing, s, user, n,
                              "it depends on tensor data, not only on "
                              "tensor metadata"));
    uses_[s].received.insert(u);
  }

  std::string cannotCross(Value* v, int s, Node* user, Node* culprit,
                          const std::string& why) const {
    const std::string used_at = user ? model_.modulePathOf(user) : std::string("the output");
    return detail::concat(
        "the value '", v->debugName(), "' (", v->type()->repr_str(), ") made by ",
        v->node()->kind().toQualString(), " in stage ", producerStage(v), " (module '",
        model_.modulePathOf(v->node()), "') is used in stage ", s, " (module '", used_at,
        "') and cannot cross the cut: ", why, " (", culprit->kind().toQualString(),
        "); move the split point (--pipeline.split_points) so both are in one stage");
  }

  // --- tensors crossing each cut ------------------------------------------------------

  // crossing_[s]: what stage s receives from stage s-1 (for s >= 1), in a fixed order.
  void findCrossings() {
    const size_t S = plan_.numStages();
    std::vector<std::set<Value*>> sets(S);
    for (size_t t = 0; t < S; ++t) {
      for (Value* v : uses_[t].received) {
        for (int s = producerStage(v) + 1; s <= static_cast<int>(t); ++s) sets[s].insert(v);
      }
    }
    crossing_.assign(S, {});
    for (size_t s = 0; s < S; ++s) {
      crossing_[s].assign(sets[s].begin(), sets[s].end());
      std::sort(crossing_[s].begin(), crossing_[s].end(),
                [&](Value* a, Value* b) { return orderKey(a) < orderKey(b); });
    }
  }

  std::pair<int64_t, size_t> orderKey(Value* v) const {
    if (isGraphInput(v)) return {-1, v->offset()};
    return {static_cast<int64_t>(index_.at(topLevelOwner(v->node()))), v->offset()};
  }

  // --- the stage's own graph ----------------------------------------------------------

  StageModule buildStage(int s) {
    const bool last = s + 1 == static_cast<int>(plan_.numStages());
    StageModule stage;
    stage.index = s;
    stage.graph = std::make_shared<torch::jit::Graph>();
    const StageRange& range = plan_.stages[s];
    for (size_t u = range.first_unit; u < range.end_unit; ++u) {
      stage.modules.push_back(plan_.units[u].path);
      stage.flops += plan_.units[u].flops;
    }
    torch::jit::Graph& g = *stage.graph;
    std::unordered_map<Value*, Value*> env;     // model value -> stage value
    std::unordered_map<Value*, Value*> packed;  // model int/List[int] -> its int64 tensor
    // Stage 0 takes every model input; those used later cross the cuts like activations.
    const std::vector<Value*> inputs =
        s == 0 ? std::vector<Value*>(graph_.inputs().begin(),
                                     graph_.inputs().begin() + model_.numInputs())
               : crossing_[s];
    for (Value* v : inputs) {
      stage.inputs.push_back(boundary(v));
      if (isTensor(v)) {
        env[v] = g.addInput()->copyMetadata(v);
      } else {
        packed[v] = g.addInput()->setType(c10::TensorType::get());
      }
    }
    addParameterInputs(s, stage, env);
    for (const auto& [v, t] : packed) env[v] = unpackMetadata(g, t, v->type());
    copyNodes(s, g, env, stage.node_call);
    const std::vector<Value*> outputs =
        last ? std::vector<Value*>(graph_.outputs().begin(), graph_.outputs().end())
             : crossing_[s + 1];
    for (Value* v : outputs) {
      stage.outputs.push_back(boundary(v));
      if (isTensor(v)) {
        g.registerOutput(env.at(v));
      } else {
        g.registerOutput(packed.count(v) ? packed.at(v) : packMetadata(g, env.at(v)));
      }
    }
    torch::jit::EliminateDeadCode(stage.graph);  // unpacked values nobody reads
    std::unordered_map<const Node*, int> live;   // deleted nodes' addresses may be reused
    for (const Node* n : g.nodes()) {
      const auto it = stage.node_call.find(n);
      if (it != stage.node_call.end()) live.insert(*it);
    }
    stage.node_call = std::move(live);
    stage.value_shapes = liveShapes(g, env);
    copyInputsWrittenInPlace(stage);
    return stage;
  }

  // The plan's shapes of the stage's live top-level tensor values (`env`: model value ->
  // stage value, some of them deleted since as dead code).
  std::unordered_map<const Value*, TensorMeta> liveShapes(
      torch::jit::Graph& g, const std::unordered_map<Value*, Value*>& env) const {
    std::unordered_set<const Value*> live(g.inputs().begin(), g.inputs().end());
    for (const Node* n : g.nodes()) live.insert(n->outputs().begin(), n->outputs().end());
    std::unordered_map<const Value*, TensorMeta> shapes;
    for (const auto& [model_value, stage_value] : env) {
      const auto meta = shapes_.find(model_value);
      if (meta != shapes_.end() && live.count(stage_value)) shapes[stage_value] = meta->second;
    }
    return shapes;
  }

  // A stage that writes in place into a tensor it receives (`x += f(x)`, ReLU(inplace=True)
  // right after a cut) would write into the sender's tensor (same process) or into a leaf
  // autograd refuses to modify: it gets a private copy first, used by everything after it,
  // forwarding included, so later stages still see the written value.
  void copyInputsWrittenInPlace(StageModule& stage) {
    torch::jit::Graph& g = *stage.graph;
    std::vector<Value*> written;
    {
      torch::jit::AliasDb aliases(stage.graph);
      for (size_t i = 0; i < stage.inputs.size(); ++i) {
        Value* in = g.inputs()[i];
        if (isTensor(in) && aliases.hasWriters(in)) written.push_back(in);
      }
    }
    for (Value* in : written) {
      torch::jit::WithInsertPoint guard(g.block()->nodes().front());
      Value* copy = g.insert(aten::clone, {in});
      in->replaceAllUsesAfterNodeWith(copy->node(), copy);
    }
  }

  // A buffer written in place (a running statistic) must live in one stage: each stage has
  // its own copy, and a write in one would never reach another's reads.
  void checkWrittenBuffersStayInOneStage() {
    torch::jit::AliasDb aliases(model_.graph);
    std::map<int, std::vector<int>> stages_of;  // parameter -> stages using it
    for (size_t s = 0; s < uses_.size(); ++s) {
      for (int p : uses_[s].parameters) stages_of[p].push_back(static_cast<int>(s));
    }
    for (const auto& [p, stages] : stages_of) {
      if (stages.size() < 2 || !aliases.hasWriters(model_.parameterInput(p))) continue;
      PPSTAGE_FAIL("'", model_.parameters[p].path, "' is written in place by the ",
                   "model and used in stages ", stages.front(), " and ", stages.back(),
                   "; a written buffer must stay in one stage: move the split point ",
                   "(--pipeline.split_points)");
    }
  }

  // One graph input and one copy per distinct tensor (tied paths in one stage share it).
  void addParameterInputs(int s, StageModule& stage, std::unordered_map<Value*, Value*>& env) {
    std::map<const c10::TensorImpl*, size_t> by_tensor;
    for (int p : uses_[s].parameters) {
      const ModelParameter& mp = model_.parameters[p];
      Value* original = model_.parameterInput(p);
      const auto known = by_tensor.find(mp.value.unsafeGetTensorImpl());
      if (known != by_tensor.end()) {
        StageParameter& shared = stage.parameters[known->second];
        shared.aliases.push_back(mp.path);
        shared.model_parameters.push_back(p);
        env[original] = stage.graph->inputs()[stage.inputs.size() + known->second];
        continue;
      }
      by_tensor.emplace(mp.value.unsafeGetTensorImpl(), stage.parameters.size());
      at::Tensor copy = mp.value.detach().clone();
      copy.set_requires_grad(mp.is_parameter && mp.value.requires_grad());
      stage.parameters.push_back(
          StageParameter{mp.path, {}, copy, mp.is_parameter, {p}, mp.random_key});
      env[original] = stage.graph->addInput()->copyMetadata(original);
    }
  }

  void copyNodes(int s, torch::jit::Graph& g, std::unordered_map<Value*, Value*>& env,
                 std::unordered_map<const Node*, int>& node_call) {
    std::vector<Node*> recomputed(uses_[s].recomputed.begin(), uses_[s].recomputed.end());
    std::sort(recomputed.begin(), recomputed.end(),
              [&](Node* a, Node* b) { return index_.at(a) < index_.at(b); });
    auto lookup = [&](Value* v) {
      const auto it = env.find(v);
      PPSTAGE_INTERNAL_ASSERT(it != env.end(), "stage ", s, " uses '", v->debugName(),
                              "' that it neither receives nor makes");
      return it->second;
    };
    auto copy = [&](Node* n) {
      Node* clone = g.appendNode(g.createClone(n, lookup));
      for (size_t i = 0; i < n->outputs().size(); ++i) env[n->output(i)] = clone->output(i);
      return clone;
    };
    for (Node* n : recomputed) copy(n);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (stage_of_node_[i] == s && !uses_[s].recomputed.count(nodes_[i])) {
        node_call[copy(nodes_[i])] = model_.callOf(nodes_[i]);
      }
    }
  }

  BoundaryTensor boundary(Value* v) const {
    BoundaryTensor b;
    b.metadata = !isTensor(v);
    b.producer_stage = isGraphInput(v) ? kModelInputStage : producerStage(v);
    if (isModelInput(v)) {
      b.name = model_.input_names.at(v->offset());
    } else {
      const std::string& path = model_.modulePathOf(topLevelOwner(v->node()));
      const std::string value = v->hasDebugName() ? v->debugName() : "%" + v->debugName();
      b.name = path.empty() ? value : path + "/" + value;
    }
    const auto meta = shapes_.find(v);
    PPSTAGE_CHECK(meta != shapes_.end(), "'", b.name, "', made in stage ", b.producer_stage,
                  ", would leave its stage (across a cut, or as the model's output) but is not ",
                  "always a tensor (a branch that raises or returns early leaves it ",
                  "undefined); move the split point");
    b.meta = meta->second;
    return b;
  }

  // --- helpers ------------------------------------------------------------------------

  bool isGraphInput(const Value* v) const { return v->node() == graph_.param_node(); }

  // One of the model's data inputs (graph inputs before the parameters).
  bool isModelInput(const Value* v) const {
    return isGraphInput(v) && v->offset() < model_.numInputs();
  }

  Node* topLevelOwner(Node* n) const { return topLevelNodeOf(n, graph_.block()); }

  int producerStage(Value* v) const {
    if (isGraphInput(v)) return kModelInputStage;
    return stage_of_node_[index_.at(topLevelOwner(v->node()))];
  }

  // A 0-dim tensor computed from sizes only (what tracing records for size arithmetic).
  bool isShapeTensor(Value* v) {
    const auto memo = shape_tensor_.find(v);
    if (memo != shape_tensor_.end()) return memo->second;
    bool result = false;
    Node* n = v->node();
    if (n->kind() == prim::NumToTensor) {
      result = true;
    } else if (!isGraphInput(v) && n->blocks().empty() && !n->hasSideEffects() &&
               n->kind() != prim::Constant) {
      const auto meta = shapes_.find(v);
      bool any_tensor = false;
      result = meta != shapes_.end() && meta->second.sizes.empty() && !meta->second.requires_grad;
      for (Value* u : n->inputs()) {
        if (!result) break;
        if (isTensor(u)) {
          any_tensor = true;
          result = isShapeTensor(u);
        }
      }
      result = result && any_tensor;
    }
    shape_tensor_[v] = result;
    return result;
  }

  const ModelGraph& model_;
  const StagePartition& plan_;
  const ValueShapes& shapes_;
  torch::jit::Graph& graph_;
  std::vector<Node*> nodes_;
  std::unordered_map<const Node*, size_t> index_;
  std::vector<int> stage_of_node_;
  std::vector<StageUses> uses_;
  std::vector<std::vector<Value*>> crossing_;
  std::unordered_map<Value*, bool> shape_tensor_;
};

}  // namespace

std::vector<StageModule> extractStages(const ModelGraph& model, const StagePartition& plan,
                                       const ValueShapes& shapes) {
  return StageExtractor(model, plan, shapes).run();
}

std::vector<TiedParameter> findTiedParameters(const ModelGraph& model,
                                              const std::vector<StageModule>& stages) {
  std::map<const c10::TensorImpl*, TiedParameter> by_tensor;
  std::vector<const c10::TensorImpl*> order;
  for (const StageModule& stage : stages) {
    for (size_t i = 0; i < stage.parameters.size(); ++i) {
      const StageParameter& p = stage.parameters[i];
      const c10::TensorImpl* key =
          model.parameters[p.model_parameters.front()].value.unsafeGetTensorImpl();
      if (!by_tensor.count(key)) order.push_back(key);
      by_tensor[key].copies.push_back(
          TiedParameter::Copy{stage.index, static_cast<int>(i), p.name});
    }
  }
  std::vector<TiedParameter> ties;
  for (const c10::TensorImpl* key : order) {
    if (by_tensor[key].copies.size() > 1) ties.push_back(by_tensor[key]);
  }
  return ties;
}

}  // namespace ppstage
