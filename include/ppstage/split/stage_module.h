// split::extract: one self-contained StageModule per stage of a StagePartition.
//
// A stage's graph is a function of its boundary inputs and its own parameters:
//
//   graph(%in_0, ..., %in_{I-1}, %param_0, ..., %param_{P-1}) -> (%out_0, ..., %out_{O-1})
//
// Stage 0 takes the model's inputs (all of them, in ModelGraph::input_names order; one a
// later stage uses crosses the cuts on its way there, like an activation); stage s > 0 takes
// exactly what stage s-1 returns; the last stage returns the model's outputs. Chained in order, the
// stages compute what the whole model computes. Several tensors may cross a cut; a tensor made in
// stage i and used in stage j > i+1 passes through the stages between. Only tensors cross: other
// values are recomputed by the consuming stage, and sizes read from tensor metadata travel as small
// int64 tensors (see Note [Values crossing a cut] in src/split/stage_module.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/split/stage_partition.h"
#include "ppstage/split/tensor_shard.h"

namespace torch::jit {
struct Graph;
struct Node;
}  // namespace torch::jit

namespace ppstage {

// A tensor crossing into or out of a stage.
struct BoundaryTensor {
  std::string name;    // "layers.3/x.9" (producing module / value), or a model input's name
  TensorMeta meta;     // shape, dtype and requires_grad for the plan's example input
  int producer_stage;  // -1 for the model's inputs
  // True for an int or List[int] read from tensor metadata, packed into an int64 tensor of
  // shape [] or [n]: no batch dimension, no gradient.
  bool metadata = false;
};

struct StageParameter {
  std::string name;                   // the first path this stage uses it by
  std::vector<std::string> aliases;   // further paths of the same tensor in this stage
  at::Tensor value;                   // the stage's own copy
  bool is_parameter = true;           // false for buffers (no gradient)
  std::vector<int> model_parameters;  // indices into ModelGraph::parameters it stands for
  bool random_key = false;            // see ModelParameter::random_key
  // Tensor parallelism (parallel/tensor_parallel.h): `value` is this rank's shard of the
  // model's tensor; not sharded (the default): the whole tensor.
  TensorShard shard{};
};

struct StageModule {
  int index = 0;
  std::vector<std::string> modules;  // paths of the units it runs
  std::shared_ptr<torch::jit::Graph> graph;
  std::vector<BoundaryTensor> inputs;
  std::vector<BoundaryTensor> outputs;
  std::vector<StageParameter> parameters;
  double flops = 0;
  // The model's module call (index into ModelGraph::calls) each top-level node of `graph`
  // was copied from; nodes the splitter added, and values recomputed from an earlier
  // stage's metadata, are not listed. What block compilation finds blocks from.
  std::unordered_map<const torch::jit::Node*, int> node_call;
  // The plan's shapes (ValueShapes) of `graph`'s top-level tensor values copied from the
  // model's graph, for the example batch (values the splitter added, such as a copy of an
  // input written in place, have none): what the tensor-parallel pass reads, and clears.
  std::unordered_map<const torch::jit::Value*, TensorMeta> value_shapes;

  // Elements of its trainable parameters, counted from `model`'s tensors (whichever rank
  // holds the stage's copies; other ranks drop theirs).
  int64_t numParams(const ModelGraph& model) const;

  // The arguments of one run of `graph`: `inputs` (the boundary values, in `inputs`'
  // order), then the parameters' values.
  std::vector<c10::IValue> arguments(const std::vector<at::Tensor>& inputs) const;
};

// One tensor of the model held by several stages, such as an embedding tied to the LM head
// on another stage. The runtime keeps the copies equal (gradients summed before the step).
struct TiedParameter {
  struct Copy {
    int stage;
    int parameter;     // index into that stage's StageModule::parameters
    std::string name;  // the path that stage uses
  };
  std::vector<Copy> copies;  // one per stage, in stage order
};

// Cuts `model` into the stages of `plan`. Each stage gets its own copy of its parameters.
// Throws ppstage::Error when a non-tensor value would have to cross a cut that cannot be
// recomputed from constants and tensor metadata (it depends on tensor data, on a
// parameter, on control flow, or is modified in place), and when a buffer the model writes
// in place would be used by two stages.
std::vector<StageModule> extractStages(const ModelGraph& model, const StagePartition& plan,
                                       const ValueShapes& shapes);

std::vector<TiedParameter> findTiedParameters(const ModelGraph& model,
                                              const std::vector<StageModule>& stages);

}  // namespace ppstage
