// The proof behind one tensor-parallel region (private to src/parallel): which values of
// a stage graph are sharded along which dimension when some linears become
// column-parallel, and what must change for every rank to compute its share exactly.
// Reads the graph, changes nothing: tensor_parallel.cpp applies a proven plan.
#pragma once

#include <c10/util/Optional.h>

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ppstage/graph/model_graph.h"
#include "ppstage/split/stage_module.h"

namespace torch::jit {
struct Node;
struct Value;
}  // namespace torch::jit

namespace ppstage::tp_detail {

// The value of a constant `v` of that type; nothing when `v` is no constant or of another
// type.
c10::optional<int64_t> constantInt(const torch::jit::Value* v);
c10::optional<std::vector<int64_t>> constantInts(const torch::jit::Value* v);
c10::optional<double> constantNumber(const torch::jit::Value* v);  // an int or a float

// A tensor's dimension `dim` holds `parts` equal parts (TensorShard), each split over the
// group's ranks.
struct Sharding {
  int dim = 0;
  int parts = 1;
};

// The ops a linear can be: y = x W^T + b (aten::linear), y = b + x W (aten::addmm, as
// Hugging Face's Conv1D), y = x W (aten::matmul, aten::mm).
struct LinearOp {
  torch::jit::Node* node = nullptr;
  torch::jit::Value* input = nullptr;   // x
  torch::jit::Value* weight = nullptr;  // W, a stage parameter
  torch::jit::Value* bias = nullptr;    // b, or null
  int out_dim = 0;                      // W's output-feature dimension
  int in_dim = 1;                       // W's input-feature dimension
};

// `node` as a linear whose weight is one of `stage`'s trainable parameters, with a bias
// that is one or none; nothing otherwise.
bool asLinear(torch::jit::Node* node, const StageModule& stage, LinearOp& linear);

struct Rewrite {
  enum class Kind {
    kShardParameter,  // parameter `parameter` becomes its `shard`
    kRowProduct,      // `node` (a linear) loses its bias, then tp_reduce, then + bias
    kDivideSize,      // input `input` of `node` (an int) becomes its value / tp
    kDivideElement,   // element `element` of list input `input` of `node` becomes / tp
    kDivideElements,  // every element of list input `input` of `node` becomes / tp
    kCopyInput,       // input `input` of `node` (replicated, needs a gradient) via tp_copy
    kDropout,         // `node` (ppstage::dropout) becomes tp_dropout of `sharding`
  };
  Kind kind;
  torch::jit::Node* node = nullptr;
  size_t input = 0;
  int element = 0;
  size_t parameter = 0;
  TensorShard shard{};
  Sharding sharding{};
};

// What proving a region found: its entry, linears and rewrites; proven when `why` is empty.
struct RegionProof {
  torch::jit::Value* entry = nullptr;  // the replicated value the column linears read
  std::vector<LinearOp> column, row;
  std::vector<Rewrite> rewrites;
  std::string why;
  // Set when a column linear's output turned out to hold `parts` parts (a fused q/k/v cut
  // by split or chunk): prove again with that hint.
  torch::jit::Node* needs_parts_of = nullptr;
  int needs_parts = 1;
  std::vector<torch::jit::Node*> reached;  // every node the region's values reached
};

// Proves the region of the column linears `seeds` (all reading `entry`; `model`: the graph
// the stage was cut from, whose tied parameters stay whole), their outputs
// holding parts_hint[node] parts (1 when not listed), for a group of `ranks` ranks of
// which this is `rank`.
RegionProof proveRegion(const StageModule& stage, const ModelGraph& model, torch::jit::Value* entry,
                        const std::vector<LinearOp>& seeds,
                        const std::map<torch::jit::Node*, int>& parts_hint, int rank, int ranks);

}  // namespace ppstage::tp_detail
