// See include/ppstage/graph/graph_runner.h.
#include "ppstage/graph/graph_runner.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "ppstage/core/error.h"

namespace ppstage {

GraphRunner::GraphRunner(std::shared_ptr<torch::jit::Graph> graph, const std::string& name,
                         bool profiling)
    : executor_(std::make_unique<torch::jit::GraphExecutor>(
          graph, name,
          profiling ? torch::jit::ExecutorExecutionMode::PROFILING
                    : torch::jit::ExecutorExecutionMode::SIMPLE)),
      num_outputs_(graph->outputs().size()),
      profiling_(profiling) {}

GraphRunner::~GraphRunner() = default;

std::vector<c10::IValue> GraphRunner::run(std::vector<c10::IValue> inputs) {
  torch::jit::Stack stack(std::make_move_iterator(inputs.begin()),
                          std::make_move_iterator(inputs.end()));
  executor_->run(stack);
  PPSTAGE_INTERNAL_ASSERT(stack.size() == num_outputs_, "graph returned ", stack.size(),
                          " values, expected ", num_outputs_);
  return std::vector<c10::IValue>(std::make_move_iterator(stack.begin()),
                                  std::make_move_iterator(stack.end()));
}

std::shared_ptr<torch::jit::Graph> GraphRunner::optimizedGraph() const {
  if (!profiling_) return nullptr;
  try {
    const torch::jit::GraphExecutorState state = executor_->getDebugState();
    for (const auto& [spec, plan] : state.execution_plans) {
      if (plan.graph) return plan.graph;
    }
  } catch (const c10::Error&) {
    // not optimized yet
  }
  return nullptr;
}

}  // namespace ppstage
