// graph::capture: a torch::jit::Module's forward -> ModelGraph (see capture.h).
//
// Steps, in order; inlineForward takes 1-3, once per model, and specializeForward 4-7, once
// per graph made from it (training, evaluation):
//   1. copy forward's graph; bake in defaults of extra arguments     (bindForwardArguments)
//   2. inline every call, tagging nodes with their module call       (module_inliner.cpp)
//   3. parameters/buffers -> graph inputs, other attributes -> constants (AttributeLifter),
//      noting the reads of `training`; drop `self`
//   4. copy the graph; for evaluation every `training` read false     (copyOf)
//   5. flatten tuple outputs (dropping Nones in them), simplify
//   5b. with an example input: decide rank and dtype checks          (specializeToTypes)
//   6. key random ops: each draws from a generator of its own           (keyed_random.cpp)
//   7. group tied tensors
#include "ppstage/graph/capture.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/lower_tuples.h>

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "fast_paths.h"
#include "keyed_random.h"
#include "module_inliner.h"
#include "ppstage/core/error.h"
#include "ppstage/core/text.h"
#include "ppstage/graph/model_failure.h"
#include "ppstage/graph/value_shapes.h"

namespace ppstage {

using torch::jit::Node;
using torch::jit::Value;
namespace prim = c10::prim;

namespace {

// What a captured graph's first output is of `output` (what forward returned): the tensor,
// a tuple's first (flattened), a dict's "loss" else its first value; undefined for None.
at::Tensor firstOf(const c10::IValue& output) {
  if (output.isTensor()) return output.toTensor();
  if (output.isTuple()) {
    for (const c10::IValue& item : output.toTupleRef().elements()) {
      const at::Tensor first = firstOf(item);
      if (first.defined()) return first;
    }
  }
  if (output.isGenericDict()) {
    const c10::impl::GenericDict dict = output.toGenericDict();
    const auto loss = dict.find("loss");
    if (loss != dict.end() && !loss->value().isNone()) return loss->value().toTensor();
    for (const auto& item : dict) {
      const at::Tensor first = firstOf(item.value());
      if (first.defined()) return first;
    }
  }
  return at::Tensor();
}

std::vector<std::string> forwardArgumentNames(const c10::FunctionSchema& schema) {
  std::vector<std::string> names;
  for (size_t i = 1; i < schema.arguments().size(); ++i)
    names.push_back(schema.arguments()[i].name());
  return names;
}

bool takesTensor(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  if (type->isSubtypeOf(*c10::TensorType::get())) return true;
  const auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->isSubtypeOf(*c10::TensorType::get());
}

// forward(self, x, mask=None, opt=1, ...): the arguments named in `fed` (forward's first
// argument when `fed` is empty) are the data inputs, typed Tensor even where forward says
// Optional[Tensor], so `mask is not None` folds; defaults of the rest become constants, so
// the graph takes exactly (self, fed...). Returns the fed arguments' names, in forward's order.
std::vector<std::string> bindForwardArguments(torch::jit::Graph& graph,
                                              const c10::FunctionSchema& schema,
                                              std::vector<std::string> fed) {
  const auto& args = schema.arguments();
  PPSTAGE_CHECK(args.size() >= 2, "the model's forward takes no input; ppstage feeds it ",
                "tensors");
  if (fed.empty()) fed.push_back(args[1].name());
  std::vector<std::string> taken;
  for (const std::string& name : fed) {
    const bool known = std::any_of(args.begin() + 1, args.end(),
                                   [&](const c10::Argument& a) { return a.name() == name; });
    PPSTAGE_CHECK(known, "the model's forward takes no argument '", name, "' (it takes ",
                  joinText(forwardArgumentNames(schema), ", "), ")");
  }
  for (size_t i = args.size() - 1; i >= 1; --i) {
    const c10::Argument& arg = args[i];
    if (std::find(fed.begin(), fed.end(), arg.name()) != fed.end()) {
      PPSTAGE_CHECK(takesTensor(arg), "the model's forward takes '", arg.name(), "' as ",
                    arg.type()->repr_str(), "; ppstage feeds its inputs tensors");
      graph.inputs()[i]->setType(c10::TensorType::get());
      taken.insert(taken.begin(), arg.name());
      continue;
    }
    PPSTAGE_CHECK(arg.default_value().has_value(), "the model's forward takes '", arg.name(), "' (",
                  arg.type()->repr_str(), ", no default), which no data input feeds ",
                  "(fed: ", joinText(fed, ", "), ")");
    torch::jit::WithInsertPoint guard(graph.block()->nodes().front());
    Value* value = graph.insertConstant(*arg.default_value());
    graph.inputs()[i]->replaceAllUsesWith(value);
    graph.eraseInput(i);
  }
  return taken;
}

bool isModule(const Value* value) {
  if (value == nullptr) return false;
  const auto type = value->type()->cast<c10::ClassType>();
  return type && type->is_module();
}

// Replaces every non-module prim::GetAttr: tensors become graph inputs (one per attribute
// path), anything else a constant.
class AttributeLifter {
 public:
  AttributeLifter(const torch::jit::Module& module, InlinedForward& forward)
      : module_(module),
        graph_(*forward.model.graph),
        out_(forward.model),
        training_reads_(forward.training_reads),
        self_(graph_.inputs().at(0)) {}

  void run(torch::jit::Block* block) {
    for (auto it = block->nodes().begin(); it != block->nodes().end();) {
      Node* node = *it++;
      for (torch::jit::Block* sub : node->blocks()) run(sub);
      // Attributes of modules only: objects of TorchScript classes made in forward keep
      // their own prim::GetAttr / prim::SetAttr.
      if (!isModule(node->inputs().empty() ? nullptr : node->input(0))) continue;
      PPSTAGE_CHECK(node->kind() != prim::SetAttr, "the model's forward assigns the module ",
                    "attribute '", attributePath(node), "'; ppstage needs a forward that ",
                    "leaves module state alone");
      if (node->kind() == prim::GetAttr && !isModule(node->output())) lift(node);
    }
  }

 private:
  std::string attributePath(Node* node) const {
    const std::string owner = graph_detail::modulePathOf(node->input(0), self_);
    const std::string& name = node->s(c10::attr::name);
    return owner.empty() ? name : owner + "." + name;
  }

  void lift(Node* node) {
    const std::string path = attributePath(node);
    const std::string owner = graph_detail::modulePathOf(node->input(0), self_);
    const torch::jit::Module holder = submodule(owner);
    const std::string& name = node->s(c10::attr::name);
    const c10::IValue value = holder.attr(name);
    Value* replacement = nullptr;
    const int call = out_.callOf(node);
    if (value.isTensor()) {
      const auto slot = holder.type()->getAttributeSlot(name);
      replacement = parameterInput(path, value.toTensor(), holder.type()->is_parameter(slot));
    } else if (value.type()->isSubtypeOf(*c10::ListType::ofTensors())) {
      torch::jit::WithInsertPoint guard(node);
      replacement = tensorListInput(path, holder, value.toList());
      if (call != ModelGraph::kRootCall) out_.node_call[replacement->node()] = call;
    } else {
      torch::jit::WithInsertPoint guard(node);
      auto constant = torch::jit::tryInsertConstant(graph_, value);
      PPSTAGE_CHECK(constant.has_value(), "module attribute '", path, "' of type ",
                    value.type()->repr_str(), " cannot be captured (not a tensor and not a ",
                    "constant)");
      replacement = *constant;
      // The constant stands where the attribute was read, in the same module call.
      if (call != ModelGraph::kRootCall) out_.node_call[replacement->node()] = call;
      if (name == "training" && value.isBool()) training_reads_.push_back(replacement->node());
    }
    node->output()->replaceAllUsesWith(replacement);
    // Forget the node before destroying it: a new node may get its address.
    out_.node_call.erase(node);
    node->destroy();
  }

  // The module at dotted `path` ("layers.3.attn"; "" is the model).
  torch::jit::Module submodule(const std::string& path) const {
    torch::jit::Module module = module_;
    size_t begin = 0;
    while (begin < path.size()) {
      size_t end = path.find('.', begin);
      if (end == std::string::npos) end = path.size();
      module = module.attr(path.substr(begin, end - begin)).toModule();
      begin = end + 1;
    }
    return module;
  }

  // A List[Tensor] attribute (an RNN's _flat_weights): a list of graph inputs, each named
  // by the holder's attribute that holds the same tensor (lstm.weight_ih_l0), else by its
  // place in the list (lstm._flat_weights.3).
  Value* tensorListInput(const std::string& path, const torch::jit::Module& holder,
                         const c10::List<c10::IValue>& items) {
    const std::string owner = path.substr(0, path.rfind('.') + 1);  // "lstm." or ""
    std::vector<Value*> inputs;
    for (size_t i = 0; i < items.size(); ++i) {
      const at::Tensor tensor = items.get(i).toTensor();
      std::string item_path = path + "." + std::to_string(i);
      bool is_parameter = tensor.requires_grad();
      for (const auto& attribute : holder.named_attributes(/*recurse=*/false)) {
        if (!attribute.value.isTensor() || !attribute.value.toTensor().is_same(tensor)) continue;
        item_path = owner + attribute.name;
        is_parameter = holder.type()->is_parameter(holder.type()->getAttributeSlot(attribute.name));
        break;
      }
      inputs.push_back(parameterInput(item_path, tensor, is_parameter));
    }
    return graph_.insertNode(graph_.createList(c10::TensorType::get(), inputs))->output();
  }

  Value* parameterInput(const std::string& path, const at::Tensor& tensor, bool is_parameter) {
    const auto known = inputs_.find(path);
    if (known != inputs_.end()) return known->second;
    ModelParameter parameter{path, tensor, is_parameter, -1};
    out_.parameters.push_back(parameter);
    std::string debug_name = path;
    std::replace(debug_name.begin(), debug_name.end(), '.', '_');
    Value* input = graph_.addInput(debug_name)->setType(c10::TensorType::get());
    inputs_.emplace(path, input);
    return input;
  }

  const torch::jit::Module& module_;
  torch::jit::Graph& graph_;
  ModelGraph& out_;
  std::vector<Node*>& training_reads_;
  Value* self_;
  std::map<std::string, Value*> inputs_;
};

void flattenInto(Value* value, std::vector<Value*>& outputs) {
  if (value->type()->isSubtypeOf(*c10::TensorType::get())) {
    outputs.push_back(value);
    return;
  }
  // A dict of tensors built in forward ({"logits": x, "loss": l}): its values in order, the
  // one keyed "loss" first (what --train.loss model takes as the loss).
  if (value->node()->kind() == prim::DictConstruct) {
    const Node* dict = value->node();
    std::vector<Value*> values;
    for (size_t i = 0; i + 1 < dict->inputs().size(); i += 2) {
      if (dict->input(i + 1)->mustBeNone()) continue;  // {"loss": None} without labels
      const auto key = torch::jit::toIValue(dict->input(i));
      const bool is_loss = key && key->isString() && key->toStringRef() == "loss";
      values.insert(is_loss ? values.begin() : values.end(), dict->input(i + 1));
    }
    for (Value* item : values) flattenInto(item, outputs);
    return;
  }
  PPSTAGE_CHECK(
      value->node()->kind() == prim::TupleConstruct, "the model returns a value of ", "type ",
      value->type()->repr_str(), " made by ", value->node()->kind().toQualString(),
      "; ppstage needs a tensor, or a tuple or ",
      "dict of tensors built in forward (returned tuples cannot come from control flow that ",
      "depends on the input)");
  for (Value* item : value->node()->inputs()) {
    // A None in a returned tuple (GoogLeNet's absent auxiliary logits) is no output.
    if (!item->mustBeNone()) flattenInto(item, outputs);
  }
}

void flattenOutputs(torch::jit::Graph& graph) {
  std::vector<Value*> outputs;
  for (Value* output : graph.outputs()) flattenInto(output, outputs);
  while (!graph.outputs().empty()) graph.eraseOutput(graph.outputs().size() - 1);
  for (Value* output : outputs) graph.registerOutput(output);
}

void findTies(ModelGraph& out) {
  std::map<const c10::TensorImpl*, std::vector<int>> by_tensor;
  for (size_t i = 0; i < out.parameters.size(); ++i) {
    by_tensor[out.parameters[i].value.unsafeGetTensorImpl()].push_back(static_cast<int>(i));
  }
  for (auto& [impl, group] : by_tensor) {
    if (group.size() < 2) continue;
    for (int index : group) out.parameters[index].tie_group = static_cast<int>(out.ties.size());
    out.ties.push_back(group);
  }
}

void checkFullyInlined(const torch::jit::Block* block, const ModelGraph& out) {
  for (const Node* node : block->nodes()) {
    PPSTAGE_CHECK(node->kind() != prim::CallMethod && node->kind() != prim::CallFunction,
                  "the model calls ", node->kind().toQualString(), " at '", out.modulePathOf(node),
                  "' whose body is not TorchScript (an interface or ",
                  "builtin); ppstage cannot capture it");
    for (const torch::jit::Block* sub : node->blocks()) checkFullyInlined(sub, out);
  }
}

// Every node of `block`, at any depth.
void collectNodes(const torch::jit::Block* block, std::unordered_set<const Node*>& nodes) {
  for (const Node* node : block->nodes()) {
    nodes.insert(node);
    for (const torch::jit::Block* sub : node->blocks()) collectNodes(sub, nodes);
  }
}

// Nodes destroyed by the passes must not linger, as node_call keys or noted reads of
// `training` (their addresses get reused).
void forgetDestroyedNodes(const torch::jit::Block* block, ModelGraph& out,
                          std::vector<Node*>* training_reads = nullptr) {
  std::unordered_set<const Node*> live;
  collectNodes(block, live);
  for (auto it = out.node_call.begin(); it != out.node_call.end();) {
    it = live.count(it->first) > 0 ? std::next(it) : out.node_call.erase(it);
  }
  if (training_reads == nullptr) return;
  training_reads->erase(std::remove_if(training_reads->begin(), training_reads->end(),
                                       [&](const Node* read) { return live.count(read) == 0; }),
                        training_reads->end());
}

// Note [Specializing to ranks and dtypes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Library modules test their input before choosing a path: torch.nn's TransformerEncoderLayer
// builds a string of reasons not to take its inference fast path, starting with
// `if src.dim() != 3`, and takes the fast path when the string is empty; MultiheadAttention
// asks `query is key`, `in_proj_weight is not None` and `is_nested`. Left undecided, the
// fast path stays in the graph: a branch whose outputs are prim::Uninitialized on the other
// path (TorchScript's early return), which wraps the rest of the layer in one node the
// splitter cannot look into. ppstage feeds tensors of one rank and dtype (only the batch
// size varies), the same assumption its boundary shapes rest on, so capture decides such
// tests once:
//   - one probe run on a small example input gives every top-level tensor value's rank and
//     dtype; aten::dim, prim::dtype, is_floating_point and prim::is_nested of those values
//     become constants (never sizes: the batch varies; never devices: stages move);
//   - `x is x` and `w is not None` for a w typed Tensor become constants, casts of a value
//     to its own type go;
//   - constant propagation removes the branches ruled out, which brings what they wrapped
//     to the top level, and the next round (at most 8) probes that.

// A value of a type that excludes None (a lifted parameter that was Optional[Tensor]).
bool cannotBeNone(const Value* value) {
  const c10::TypeKind kind = value->type()->kind();
  return kind != c10::TypeKind::OptionalType && kind != c10::TypeKind::NoneType &&
         kind != c10::TypeKind::AnyType && kind != c10::TypeKind::UnionType;
}

// `x is x`, `x is not x` (MultiheadAttention's self-attention test) and `w is not None` for
// a w that cannot be None become constants; casts of a value to its own type go.
bool foldIdentityTests(torch::jit::Block* block) {
  bool changed = false;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) changed |= foldIdentityTests(sub);
    if (node->kind() == c10::prim::unchecked_cast &&
        node->input()->type()->isSubtypeOf(*node->output()->type())) {
      node->output()->replaceAllUsesWith(node->input());  // Optional refined to what it is
      changed = true;
      continue;
    }
    const bool is = node->kind() == c10::aten::__is__;
    if (!is && node->kind() != c10::aten::__isnot__) continue;
    Value* a = node->input(0);
    Value* b = node->input(1);
    std::optional<bool> same;
    if (a == b) same = true;
    if ((a->mustBeNone() && cannotBeNone(b)) || (b->mustBeNone() && cannotBeNone(a))) same = false;
    if (!same) continue;
    torch::jit::WithInsertPoint guard(node);
    node->output()->replaceAllUsesWith(node->owningGraph()->insertConstant(is == *same));
    changed = true;
  }
  return changed;
}

// Rank and dtype reads of values the probe saw, as constants.
bool foldRankAndDtype(torch::jit::Block* block, const ValueShapes& seen) {
  static const c10::Symbol is_nested = c10::Symbol::prim("is_nested");
  bool changed = false;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) changed |= foldRankAndDtype(sub, seen);
    if (node->inputs().size() != 1) continue;
    const auto meta = seen.find(node->input(0));
    if (meta == seen.end()) continue;
    std::optional<c10::IValue> known;
    if (node->kind() == c10::aten::dim) known = static_cast<int64_t>(meta->second.sizes.size());
    if (node->kind() == c10::prim::dtype) known = static_cast<int64_t>(meta->second.dtype);
    if (node->kind() == c10::aten::is_floating_point) {
      known = at::isFloatingType(meta->second.dtype);
    }
    if (node->kind() == is_nested) known = false;  // the probe saw a dense tensor
    if (!known) continue;
    torch::jit::WithInsertPoint guard(node);
    node->output()->replaceAllUsesWith(node->owningGraph()->insertConstant(*known));
    changed = true;
  }
  return changed;
}

// Python warnings in the scripted code (GoogLeNet's "Scripted GoogleNet always returns
// GoogleNetOutputs Tuple") went out once in the probe runs; TorchScript would repeat them on
// every forward of every rank.
void dropWarnings(torch::jit::Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) dropWarnings(sub);
    if (node->kind() == c10::Symbol::aten("warn")) node->destroy();
  }
}

// See Note [Specializing to ranks and dtypes].
void specializeToTypes(ModelGraph& out, const std::vector<at::Tensor>& example) {
  for (int round = 0; round < 8; ++round) {
    bool changed = foldIdentityTests(out.graph->block());
    ValueShapes seen;
    try {
      seen = probeTensorValues(out, example);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // the interpreter's errors are not all c10::Error
      throw Error("the model fails on an example input (" + inputsText(out.input_names, example) +
                  "): " + describeModelFailure(out, example, errorMessage(e)));
    }
    changed |= foldRankAndDtype(out.graph->block(), seen);
    if (!changed) return;
    torch::jit::ConstantPropagationImmutableTypes(out.graph);
    torch::jit::EliminateDeadCode(out.graph);
    forgetDestroyedNodes(out.graph->block(), out);
  }
}

// Each node of `from` and its copy in `to`, a clone of it (Graph::copy keeps the order).
void mapCopiedNodes(const torch::jit::Block* from, torch::jit::Block* to,
                    std::unordered_map<const Node*, Node*>& copies) {
  auto copy = to->nodes().begin();
  for (const Node* node : from->nodes()) {
    PPSTAGE_INTERNAL_ASSERT(copy != to->nodes().end() && copy->kind() == node->kind(),
                            "a copied graph has its nodes in the original's order");
    copies.emplace(node, *copy);
    for (size_t b = 0; b < node->blocks().size(); ++b) {
      mapCopiedNodes(node->blocks()[b], copy->blocks()[b], copies);
    }
    ++copy;
  }
}

// `forward`'s model with a graph of its own (the tensors shared), each node's module call
// kept, and for kEval every `training` read false.
ModelGraph copyOf(const InlinedForward& forward, ForwardMode mode) {
  ModelGraph out = forward.model;
  out.graph = forward.model.graph->copy();
  std::unordered_map<const Node*, Node*> copies;
  mapCopiedNodes(forward.model.graph->block(), out.graph->block(), copies);
  out.node_call.clear();
  for (const auto& [node, call] : forward.model.node_call) {
    out.node_call.emplace(copies.at(node), call);
  }
  if (mode != ForwardMode::kEval) return out;
  for (const Node* read : forward.training_reads) {
    Node* copy = copies.at(read);
    torch::jit::WithInsertPoint guard(copy);
    copy->output()->replaceAllUsesWith(out.graph->insertConstant(false));
    out.node_call.erase(copy);
    copy->destroy();
  }
  return out;
}
}  // namespace

at::Tensor firstModelOutput(const c10::IValue& output) {
  const at::Tensor first = firstOf(output);
  PPSTAGE_CHECK(first.defined(), "the model returned no tensor");
  return first;
}

ModelGraph captureModel(const torch::jit::Module& module, const at::Tensor& example) {
  return captureModel(
      module, {}, example.defined() ? std::vector<at::Tensor>{example} : std::vector<at::Tensor>{});
}

ModelGraph captureModel(const torch::jit::Module& module, const std::vector<std::string>& inputs,
                        const std::vector<at::Tensor>& example) {
  return specializeForward(inlineForward(module, inputs), ForwardMode::kAsInlined, example);
}

InlinedForward inlineForward(const torch::jit::Module& module,
                             const std::vector<std::string>& inputs) {
  const torch::jit::Method forward = module.get_method("forward");
  InlinedForward inlined;
  ModelGraph& out = inlined.model;
  out.graph = torch::jit::toGraphFunction(forward.function()).graph()->copy();
  torch::jit::Graph& graph = *out.graph;
  out.input_names = bindForwardArguments(graph, forward.function().getSchema(), inputs);
  PPSTAGE_INTERNAL_ASSERT(inputs.empty() || out.input_names == inputs,
                          "inputs are fed in forward's order");
  out.calls.push_back(ModuleCall{"", module.type()->name()->qualifiedName(), -1});

  graph_detail::inlineCallsWithPaths(graph, out.calls, out.node_call);
  checkFullyInlined(graph.block(), out);
  // Passes destroy nodes and make new ones that may reuse their addresses: destroyed nodes
  // are dropped from node_call after each pass. A node a pass creates may still inherit a
  // stale tag within that pass; only constants are made that way, and units ignore the
  // tags of constants (see Note [Splittable units]).
  AttributeLifter(module, inlined).run(graph.block());
  torch::jit::EliminateDeadCode(out.graph);
  forgetDestroyedNodes(graph.block(), out, &inlined.training_reads);
  PPSTAGE_INTERNAL_ASSERT(!graph.inputs()[0]->hasUses(), "self is still used after lifting");
  graph.eraseInput(0);
  return inlined;
}

ModelGraph specializeForward(const InlinedForward& forward, ForwardMode mode,
                             const std::vector<at::Tensor>& example) {
  ModelGraph out = copyOf(forward, mode);
  torch::jit::Graph& graph = *out.graph;
  // Note [Fast paths]: innermost first, until no test is left to decide (each round decides
  // at least one If, which then goes).
  for (int round = 0; graph_detail::ruleOutFastPaths(graph.block()); ++round) {
    PPSTAGE_INTERNAL_ASSERT(round < 1000, "fast-path tests still undecided after 1000 rounds");
    torch::jit::ConstantPropagationImmutableTypes(out.graph);
    while (graph_detail::foldSameBranches(graph.block())) {
      torch::jit::ConstantPropagationImmutableTypes(out.graph);
    }
    torch::jit::EliminateDeadCode(out.graph);
    forgetDestroyedNodes(graph.block(), out);
  }
  // Simplify before reading the outputs: a tuple returned through an `if` on a baked-in
  // default or a fed Optional (`if labels is not None`) is a plain TupleConstruct afterwards.
  foldIdentityTests(graph.block());
  forgetDestroyedNodes(graph.block(), out);
  torch::jit::LowerSimpleTuples(out.graph);
  forgetDestroyedNodes(graph.block(), out);
  torch::jit::ConstantPropagationImmutableTypes(out.graph);
  forgetDestroyedNodes(graph.block(), out);
  flattenOutputs(graph);
  torch::jit::EliminateDeadCode(out.graph);
  forgetDestroyedNodes(graph.block(), out);
  if (!example.empty()) {
    PPSTAGE_INTERNAL_ASSERT(example.size() == out.numInputs(), "one example tensor per input");
    specializeToTypes(out, example);
    dropWarnings(graph.block());
    forgetDestroyedNodes(graph.block(), out);
  }
  graph_detail::keyRandomOps(out);
  findTies(out);
  forgetDestroyedNodes(graph.block(), out);
  return out;
}

}  // namespace ppstage
