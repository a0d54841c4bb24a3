// compile::compile: how a stage's graph is run — the box between the splitter's
// StageModule and the runtime's Executor.
//
//   none   TorchScript's simple executor: ops run one by one as in eager mode, recording
//          autograd as eager ops do. The numerics baseline.
//   stage  one profiling GraphExecutor over the whole stage graph: after a profiling run
//          it specializes shapes, builds differentiable subgraphs (autodiff) and fuses where
//          a fuser exists. A new input shape makes it specialize again.
//   block  the stage graph cut again into segments at block boundaries (segments.h); each
//          segment runs through a profiling GraphExecutor taken from the rank's
//          CompileCache, keyed by the segment's structure and its inputs' types (and
//          sizes, unless shapes are dynamic), so identical blocks share one executor:
//          compile work grows with the number of distinct blocks, not with depth.
//
// When autograd records (grad mode on, an input requiring grad), stage and block run the
// graph, or each segment, differentiated ahead of time with its backward cut into input
// and weight gradients (split_autodiff.h), so that an I/W split costs one backward.
//
// With activation recomputation (--train.recompute, recompute.h) a stage runs as segments
// in every mode: in block mode its blocks' segments, in none and stage each recomputed
// block a segment and the code between them another. A recomputed segment keeps only its
// inputs; its backward runs it again recording autograd (in stage and block through the
// autodiff runner, whose backward graph consumes what its forward graph returned), then
// differentiates that.
#pragma once

#include <ATen/core/ivalue.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/compile/segments.h"
#include "ppstage/config/config.h"
#include "ppstage/graph/graph_runner.h"

namespace torch::jit {
struct Graph;
}  // namespace torch::jit

namespace ppstage {

struct AutodiffInputs;
class TraceRecorder;

// The work activation recomputation did on one rank.
struct RecomputeStats {
  int64_t reruns = 0;  // recomputed segments' forwards run again
  double seconds = 0;  // their time, on the steady clock
};

// What compiling cost on one rank.
struct CompileStats {
  CompileMode mode = CompileMode::kNone;
  int64_t graphs_compiled = 0;    // executors created (profiling ones; 0 for none)
  int64_t cache_hits = 0;         // a segment bound to an executor another segment made
  int64_t respecializations = 0;  // a graph's inputs changed and it was compiled again
  // The most executors any one graph (a stage's, or a distinct block's) got: one per input
  // shape with static shapes (one per bucket of --data.seq_len_policy bucket), one with
  // dynamic shapes.
  int64_t specializations_per_graph = 0;
  // In the optimized graphs: fused kernels (TensorExpr, CUDA or oneDNN fusion groups; none
  // on CPU without LLVM) and differentiable subgraphs (autodiff).
  int64_t fusion_groups = 0;
  int64_t differentiable_graphs = 0;
};

// How the profiling executor treats shapes it has not seen: `dynamic` false keeps static
// specializations (one optimized graph per shape), true compiles shape-generic graphs,
// each with a bounded number of specializations (TorchScript's fusion strategy). Process-wide.
void setShapeStrategy(bool dynamic);

// Whether TorchScript may fuse kernels on the CPU in this process: false by default in
// LibTorch (torch::jit::canFuseOnCPU), and a wheel built without LLVM has no CPU fuser, so
// stage and block make no fusion groups on the CPU. On a GPU the TensorExpr fuser fuses.
bool fusesOnCpu();

// The executors of one rank, shared by all its stages. Executors are keyed by the graph's
// structure and its inputs' dtypes, requires_grad and devices, and, with static shapes,
// their sizes: a new shape gets its own executor (compiled again, counted as a
// re-specialization). With dynamic shapes (`dynamic_shapes`, which goes with
// setShapeStrategy(true)) one executor takes every shape and TorchScript's guards decide what to
// optimize again, within the fusion strategy's bounded depth.
struct CompileCacheOptions {
  CompileMode mode = CompileMode::kNone;
  // Names this rank in the warning printed once when graphs have been compiled again for
  // changed inputs more than `max_respecializations` times.
  int rank = 0;
  int64_t max_respecializations = 8;
  bool dynamic_shapes = false;  // goes with setShapeStrategy(true)
};

class CompileCache {
 public:
  explicit CompileCache(const CompileCacheOptions& options)
      : rank_(options.rank),
        max_respecializations_(options.max_respecializations),
        dynamic_shapes_(options.dynamic_shapes) {
    stats_.mode = options.mode;
  }
  explicit CompileCache(CompileMode mode) : CompileCache(CompileCacheOptions{mode}) {}
  CompileMode mode() const { return stats_.mode; }
  bool dynamicShapes() const { return dynamic_shapes_; }
  const CompileStats& stats() const { return stats_; }

  struct Lookup {
    GraphRunner* runner;
    bool compiled;  // made now (a miss), not found
  };
  // The runner for graphs printing as `structure`, for inputs of `signature`; made from a
  // copy of `graph` (counted as compiled) or found (a hit). With `autodiff`, one that runs
  // `graph` split for autograd (splitAutodiff); `signature` must then say so.
  Lookup runner(const std::string& structure, const std::string& signature,
                const std::shared_ptr<torch::jit::Graph>& graph, const std::string& name,
                const AutodiffInputs* autodiff = nullptr);

  // Counts a re-specialization of `name` (compiled again for inputs `signature`); warns
  // once past the bound.
  void respecialized(const std::string& name, const std::string& signature);

  // Fills stats().fusion_groups and differentiable_graphs from the optimized graphs.
  void countOptimizedGraphs();

  // What this rank's recomputed segments cost, and where their reruns are traced (null:
  // nowhere), for all the stages that run from this cache.
  RecomputeStats& recomputeStats() { return recompute_; }
  void setTrace(TraceRecorder* trace) { trace_ = trace; }
  TraceRecorder* trace() const { return trace_; }

 private:
  int rank_;
  int64_t max_respecializations_;
  bool dynamic_shapes_;
  bool warned_ = false;
  bool warned_eager_ = false;
  CompileStats stats_;
  RecomputeStats recompute_;
  TraceRecorder* trace_ = nullptr;
  int64_t split_graphs_ = 0;  // differentiable regions of the autodiff runners
  std::map<std::string, std::unique_ptr<GraphRunner>> runners_;
  std::map<std::string, int64_t> specializations_;  // per graph structure: executors made
};

class CompiledStage {
 public:
  // `graph` is the stage's (the StageModule keeps it unchanged): `num_inputs` boundary
  // inputs, then parameters. `name` appears in TorchScript's errors ("stage 2"). For block
  // mode, or with recomputation, `segments` are the stage's (segmentStage), and
  // `recomputed` says which of them recompute (none: `recomputed` empty); `cache` must
  // outlive the stage.
  CompiledStage(const std::shared_ptr<torch::jit::Graph>& graph, size_t num_inputs,
                CompileCache& cache, const std::string& name,
                std::vector<GraphSegment> segments = {}, std::vector<bool> recomputed = {});
  ~CompiledStage();

  CompileMode mode() const { return cache_.mode(); }
  // The module paths of the blocks that recompute, in execution order.
  std::vector<std::string> recomputedBlocks() const;

  // Runs the graph on `inputs` (boundary inputs, then parameters) and returns its outputs.
  // Records autograd when grad mode is on and an input requires grad. Throws c10::Error
  // when an op fails.
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs);

 private:
  // Segment k's outputs for `args`; a recomputed one's through a recompute node.
  std::vector<c10::IValue> runSegment(size_t k, std::vector<c10::IValue> args);
  // Segment k's graph run on `args` (in stage and block, on its binding's executor).
  std::vector<c10::IValue> runSegmentGraph(size_t k, std::vector<c10::IValue> args);
  // Recomputed segment k's rerun graph run on `args`.
  std::vector<c10::IValue> runRerunGraph(size_t k, std::vector<c10::IValue> args);

  struct Binding {  // which executor a graph runs on, for the inputs last seen
    std::string signature;
    GraphRunner* runner = nullptr;
  };
  // `graph_inputs`: the stage graph's values `graph` takes, in order (its parameters are
  // the weights an autodiff runner gives W).
  GraphRunner& bind(Binding& binding, const std::string& structure,
                    const std::shared_ptr<torch::jit::Graph>& graph,
                    const std::vector<c10::IValue>& args,
                    const std::vector<torch::jit::Value*>& graph_inputs);

  std::shared_ptr<torch::jit::Graph> graph_;
  size_t num_inputs_;
  CompileCache& cache_;
  std::string name_;
  std::unique_ptr<GraphRunner> simple_;  // none
  Binding whole_;                        // stage
  std::vector<GraphSegment> segments_;   // block, or recomputation
  std::vector<Binding> bindings_;        // stage and block: each segment's
  struct Rerun {       // a recomputed segment's graph for its reruns, and where it runs
    RerunGraph graph;  // inputPerReader(segment's graph)
    std::vector<torch::jit::Value*> inputs;  // the stage graph's values its inputs read
    std::unique_ptr<GraphRunner> simple;     // none
    Binding binding;                         // stage and block
  };
  std::vector<Rerun> reruns_;  // per segment (a null graph where it does not recompute)
  // none, with recomputation: each segment's (null for a recomputed one, run by its Rerun)
  std::vector<std::unique_ptr<GraphRunner>> simple_segments_;
  std::vector<bool> recomputed_;
};

}  // namespace ppstage
