// See module_inliner.h.
#include "module_inliner.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <algorithm>

#include "ppstage/core/error.h"

namespace ppstage::graph_detail {

using torch::jit::Node;
using torch::jit::Value;
namespace prim = c10::prim;

std::string modulePathOf(Value* module_value, Value* self) {
  std::vector<std::string> names;
  Value* v = module_value;
  while (v != self && v->node()->kind() == prim::GetAttr) {
    names.push_back(v->node()->s(c10::attr::name));
    v = v->node()->input(0);
  }
  PPSTAGE_CHECK(v == self, "a module used in forward (", module_value->type()->repr_str(),
                ") is not reached from self through attributes; ppstage cannot name it");
  std::string path;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!path.empty()) path += '.';
    path += *it;
  }
  return path;
}

namespace {

bool isCall(const Node* node) {
  return node->kind() == prim::CallMethod || node->kind() == prim::CallFunction;
}

class CallInliner {
 public:
  CallInliner(torch::jit::Graph& graph, std::vector<ModuleCall>& calls,
              std::unordered_map<const Node*, int>& node_call)
      : self_(graph.inputs().at(0)), calls_(calls), node_call_(node_call) {}

  void run(torch::jit::Block* top) {
    collect(top);
    while (!pending_.empty()) {
      Node* call = pending_.back();
      pending_.pop_back();
      inlineOne(call);
    }
  }

 private:
  void collect(torch::jit::Block* block) {
    for (Node* node : block->nodes()) collectNode(node);
  }
  void collectNode(Node* node) {
    if (isCall(node)) pending_.push_back(node);
    for (torch::jit::Block* sub : node->blocks()) collect(sub);
  }

  void tag(Node* node, int call) {
    if (call != ModelGraph::kRootCall) node_call_[node] = call;
    for (torch::jit::Block* sub : node->blocks()) {
      for (Node* inner : sub->nodes()) tag(inner, call);
    }
  }

  int callerOf(const Node* node) const {
    const auto it = node_call_.find(node);
    return it == node_call_.end() ? ModelGraph::kRootCall : it->second;
  }

  // The call that the inlined body belongs to: a new module call for a method of another
  // module; the caller itself for its own methods and for free functions.
  int calleeCall(Node* call_node, int caller) {
    if (call_node->kind() != prim::CallMethod) return caller;
    // Methods of TorchScript class objects made in forward belong to the calling module.
    const auto owner = call_node->input(0)->type()->cast<c10::ClassType>();
    if (!owner || !owner->is_module()) return caller;
    const std::string path = modulePathOf(call_node->input(0), self_);
    if (path == calls_[caller].path) return caller;
    calls_.push_back(
        ModuleCall{path, owner->name() ? owner->name()->qualifiedName() : "?", caller});
    return static_cast<int>(calls_.size()) - 1;
  }

  void inlineOne(Node* call_node) {
    torch::jit::GraphFunction* function = torch::jit::tryToGraphFunction(call_node);
    if (function == nullptr) return;  // left in place; capture rejects what remains
    const int caller = callerOf(call_node);
    const int callee = calleeCall(call_node, caller);
    Node* before = call_node->prev();
    Node* after = call_node->next();
    node_call_.erase(call_node);
    // A CallFunction's first input is the function itself, not an argument.
    if (call_node->kind() == prim::CallFunction) call_node->removeInput(0);
    torch::jit::inlineCallTo(call_node, function, function->graph().get());
    for (Node* node = before->next(); node != after; node = node->next()) {
      tag(node, callee);
      collectNode(node);
    }
  }

  Value* self_;
  std::vector<ModuleCall>& calls_;
  std::unordered_map<const Node*, int>& node_call_;
  std::vector<Node*> pending_;
};

}  // namespace

void inlineCallsWithPaths(torch::jit::Graph& graph, std::vector<ModuleCall>& calls,
                          std::unordered_map<const Node*, int>& node_call) {
  PPSTAGE_INTERNAL_ASSERT(calls.size() == 1, "the root call must be the only call so far");
  CallInliner(graph, calls, node_call).run(graph.block());
}

}  // namespace ppstage::graph_detail
