// See include/ppstage/graph/model_failure.h.
#include "ppstage/graph/model_failure.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <unordered_map>

namespace ppstage {

using torch::jit::Node;
using torch::jit::Value;

namespace {

// The graph's first `count` top-level nodes, every output returned (so none is dropped).
std::shared_ptr<torch::jit::Graph> prefixOf(const torch::jit::Graph& graph, size_t count) {
  auto prefix = std::make_shared<torch::jit::Graph>();
  std::unordered_map<const Value*, Value*> copy_of;
  for (const Value* input : graph.inputs()) {
    copy_of[input] = prefix->addInput()->copyMetadata(const_cast<Value*>(input));
  }
  size_t index = 0;
  for (const Node* node : graph.nodes()) {
    if (index++ == count) break;
    Node* clone = prefix->appendNode(
        prefix->createClone(const_cast<Node*>(node), [&](Value* v) { return copy_of.at(v); }));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      copy_of[node->output(i)] = clone->output(i);
      prefix->registerOutput(clone->output(i));
    }
  }
  return prefix;
}

bool runs(const std::shared_ptr<torch::jit::Graph>& graph, const std::vector<c10::IValue>& inputs) {
  torch::jit::Stack stack;
  for (const c10::IValue& input : inputs) {
    stack.push_back(input.isTensor() ? c10::IValue(input.toTensor().detach().clone()) : input);
  }
  try {
    const torch::jit::Code code(graph, "ppstage_locate");
    torch::jit::InterpreterState(code).run(stack);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string errorMessage(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
}

std::string rootCause(const std::string& message) {
  const size_t end = message.find_last_not_of(" \n");
  if (end == std::string::npos) return message;
  const size_t newline = message.rfind('\n', end);
  const size_t begin = newline == std::string::npos ? 0 : newline + 1;
  const std::string line = message.substr(begin, end + 1 - begin);
  // "RuntimeError: ...", "builtins.IndexError: ...": the type is one word before ": ".
  const size_t colon = line.find(": ");
  if (colon == std::string::npos || line.find(' ') < colon) return line;
  const std::string type = line.substr(0, colon);
  const bool is_type = type.size() > 5 && (type.compare(type.size() - 5, 5, "Error") == 0 ||
                                           type.find("Exception") != std::string::npos);
  return is_type ? line.substr(colon + 2) : line;
}

const Node* findFailingNode(const torch::jit::Graph& graph,
                            const std::vector<c10::IValue>& inputs) {
  at::NoGradGuard no_grad;
  std::vector<const Node*> nodes(graph.nodes().begin(), graph.nodes().end());
  size_t ok = 0, fails = nodes.size();  // a prefix of `ok` nodes runs, one of `fails` fails
  // Only a failure the rerun reproduces, from a state where nothing fails yet, can be
  // located (not one of a corrupted device, say).
  if (runs(prefixOf(graph, fails), inputs) || !runs(prefixOf(graph, 0), inputs)) return nullptr;
  while (fails - ok > 1) {
    const size_t mid = ok + (fails - ok) / 2;
    if (runs(prefixOf(graph, mid), inputs)) {
      ok = mid;
    } else {
      fails = mid;
    }
  }
  return nodes[fails - 1];
}

std::string describeFailure(const std::string& message, const Node* node,
                            const std::string& module_path) {
  std::string where;
  if (!module_path.empty()) where = "in module '" + module_path + "'";
  if (node != nullptr)
    where += (where.empty() ? "" : ", ") + std::string(node->kind().toQualString());
  const std::string cause = rootCause(message);
  return where.empty() ? cause : cause + " (" + where + ")";
}

std::string describeModelFailure(const ModelGraph& model, const std::vector<at::Tensor>& input,
                                 const std::string& message) {
  std::vector<c10::IValue> inputs(input.begin(), input.end());
  for (const ModelParameter& p : model.parameters) inputs.emplace_back(p.value);
  const Node* node = findFailingNode(*model.graph, inputs);
  return describeFailure(message, node, node != nullptr ? model.modulePathOf(node) : "");
}

}  // namespace ppstage
