// Capture rules out torch.nn's inference fast paths (see Note [Fast paths] in
// fast_paths.cpp). Private to src/graph (used by capture.cpp).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace ppstage::graph_detail {

// Sets the condition of every prim::If in `block` (and its sub-blocks) one of whose
// branches runs a fast-path op itself and the other none, so that the other runs; constant
// propagation then drops the fast path. Returns whether anything changed.
bool ruleOutFastPaths(torch::jit::Block* block);

// Removes every prim::If in `block` (and its sub-blocks) whose branches run nothing and
// return the same values, its outputs replaced by them. Returns whether anything changed.
bool foldSameBranches(torch::jit::Block* block);

}  // namespace ppstage::graph_detail
