// Tensor parallelism found in a stage's graph: the pass between split::extract and
// compile. It rewrites a StageModule for one rank of a tensor-parallel group; the model is
// never rewritten by hand. See Note [Tensor-parallel regions] in
// src/parallel/tensor_parallel.cpp.
//
// A region is what Megatron writes by hand: linears reading one replicated value (the
// column-parallel ones: q, k, v or a fused qkv, an MLP's up and gate projections), what
// follows them through elementwise ops, reshapes and attention, and the linears that close
// it (row-parallel: an attention's output projection, an MLP's down projection). Each rank
// holds 1/tp of the column linears' output features (whole heads: a fused projection's
// q, k and v parts each sharded) and of the row linears' input features; the region's
// entry is a ppstage::tp_copy and each row product a ppstage::tp_reduce (tp_group.h).
// Sizes the region computes with (`view(B, T, heads, hd)`, `split(C)`, `reshape(B, T, C)`)
// become their per-rank values. A region the pass cannot prove stays replicated: computed
// whole on every rank, with the reason in its report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppstage/graph/model_graph.h"
#include "ppstage/split/stage_module.h"

namespace ppstage {

class TpGroup;

// One region the pass found, sharded or not.
struct TpRegion {
  std::string module;  // the module path holding its linears: "layers.3.attn"
  bool sharded = false;
  std::string why;                  // not sharded: the reason ("softmax over the sharded dim")
  std::vector<std::string> column;  // its column-parallel weights' paths
  std::vector<std::string> row;     // its row-parallel weights' paths
};

// What the pass did to one stage.
struct TpStageReport {
  int stage = 0;
  std::vector<TpRegion> regions;
  // Elements of the whole model's trainable tensors this stage holds sharded, and whole.
  int64_t sharded_elements = 0;
  int64_t replicated_elements = 0;
  // The group's all-reduces per micro-batch: in the forward (one per row-parallel product),
  // and in the backward (one per region entry, and per replicated operand a region reads
  // that needs a gradient).
  int64_t forward_all_reduces = 0;
  int64_t backward_all_reduces = 0;
};

// Rewrites `stage` (as extracted: StageModule::value_shapes must be filled) into rank
// group.rank()'s share of it: its graph, and its parameters (sharded ones replaced by their
// shard, StageParameter::shard set). `model` is the graph the stage was cut from (module
// paths). With a group of one rank the stage is left as it is. Clears value_shapes.
TpStageReport shardStage(StageModule& stage, const ModelGraph& model, const TpGroup& group);

// "4 of 5 regions sharded, 98304 of 106496 parameters sharded; 4 all-reduces forward, 4
// backward per micro-batch"
std::string summarizeRegions(const TpStageReport& report);

// "layers.0.attn sharded (column layers.0.attn.qkv.weight; row layers.0.attn.proj.weight)",
// "lm_head replicated: <why>": one line per region of `report`.
std::vector<std::string> describeRegions(const TpStageReport& report);

}  // namespace ppstage
