// compile::compile: how a stage's graph is run — the box between the splitter's
// StageModule and the runtime's Executor.
//
//   none   TorchScript's simple executor: ops run one by one as in eager mode, recording
//          autograd as eager ops do. The numerics baseline.
//   stage  one profiling GraphExecutor over the whole stage graph: after a profiling run
//          it specializes shapes, builds differentiable subgraphs (autodiff) and fuses where
//          a fuser exists. A new input shape makes it specialize again.
//
// `block` (each repeated block compiled once and shared) is a later step (issue 6).
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

#include "ppstage/graph/graph_runner.h"

namespace torch::jit {
struct Graph;
}  // namespace torch::jit

namespace ppstage {

enum class CompileMode { kNone, kStage };

// "none" | "stage"; throws ppstage::Error otherwise.
CompileMode parseCompileMode(const std::string& text);
const char* toString(CompileMode mode);

class CompiledStage {
 public:
  // Compiles a copy of `graph` (the StageModule keeps the splitter's graph). `name`
  // appears in TorchScript's errors ("stage 2").
  CompiledStage(const std::shared_ptr<torch::jit::Graph>& graph, CompileMode mode,
                const std::string& name);

  CompileMode mode() const { return mode_; }

  // Runs the graph on `inputs` (boundary inputs, then parameters) and returns its outputs.
  // Records autograd when grad mode is on and an input requires grad. Throws c10::Error
  // when an op fails.
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) {
    return runner_.run(std::move(inputs));
  }

 private:
  CompileMode mode_;
  GraphRunner runner_;
};

}  // namespace ppstage
