// Where and why running a model's graph failed: errors that name the module.
//
// TorchScript's interpreter reports a failing op with a traceback of the Python source it
// was scripted from, which names files and lines but not which of the model's modules ran
// it (every nn.Embedding runs the same line of functional.py). Capture knows each node's
// module call, so on failure ppstage runs the graph again, one growing prefix of its
// top-level nodes at a time (bisection, no autograd, on copies of the inputs), to find the
// node that fails, and names its module.
#pragma once

#include <ATen/core/ivalue.h>

#include <exception>
#include <string>
#include <vector>

#include "ppstage/graph/model_graph.h"

namespace torch::jit {
struct Graph;
struct Node;
}  // namespace torch::jit

namespace ppstage {

// An exception's message without a C++ backtrace (c10::Error carries one).
std::string errorMessage(const std::exception& e);

// The real cause in an interpreter error: the last line of `message` without its exception
// type ("index out of range in self").
std::string rootCause(const std::string& message);

// The top-level node of `graph` whose run on `inputs` fails, or nullptr when the rerun
// does not fail (the failure depends on state the rerun does not have) or fails even with
// no node run. Tensors in `inputs`
// are copied before each run, so buffers the graph updates in place stay as they were.
const torch::jit::Node* findFailingNode(const torch::jit::Graph& graph,
                                        const std::vector<c10::IValue>& inputs);

// "<cause> (in module 'transformer.wte', aten::embedding)"; the parenthesis names only what
// is known (`module_path` empty: the model itself or code the splitter added).
std::string describeFailure(const std::string& message, const torch::jit::Node* node,
                            const std::string& module_path);

// describeFailure for `model` failing on `input` (one tensor per model input) with
// `message`: locates the failing node.
std::string describeModelFailure(const ModelGraph& model, const std::vector<at::Tensor>& input,
                                 const std::string& message);

}  // namespace ppstage
