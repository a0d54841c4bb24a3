// Runs a functional graph (a ModelGraph or a stage's graph) through a TorchScript
// GraphExecutor. By default the simple executor: no profiling, no specialization, no
// fusion; ops run as in eager mode and record autograd as eager ops do. This is the
// numerics baseline every compile mode is held to. With `profiling`, the profiling
// executor, which optimizes the graph after its first runs (see compile/compiled_stage.h).
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
struct GraphExecutor;
}  // namespace torch::jit

namespace ppstage {

class GraphRunner {
 public:
  // The executor owns and may rewrite `graph`; pass a copy to keep the original.
  GraphRunner(std::shared_ptr<torch::jit::Graph> graph, const std::string& name,
              bool profiling = false);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // Runs the graph on `inputs` (one per graph input, in order) and returns its outputs.
  // Blocking; throws c10::Error when an op fails.
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs);

  // The graph a profiling executor runs once it has optimized (after its profiling run);
  // nullptr before that, and for the simple executor.
  std::shared_ptr<torch::jit::Graph> optimizedGraph() const;

 private:
  std::unique_ptr<torch::jit::GraphExecutor> executor_;
  size_t num_outputs_;
  bool profiling_;
};

}  // namespace ppstage
