// See fast_paths.h.
#include "fast_paths.h"

#include <torch/csrc/jit/ir/constants.h>

#include <memory>
#include <optional>
#include <string>

namespace ppstage::graph_detail {

// Note [Fast paths]
// ~~~~~~~~~~~~~~~~~
// nn.TransformerEncoder, TransformerEncoderLayer and MultiheadAttention each test whether
// they may take an inference fast path: a fused kernel (aten::_transformer_encoder_layer_fwd,
// aten::_native_multi_head_attention) and, given a padding mask, nested tensors
// (aten::_nested_tensor_from_mask, then to_padded_tensor). The test is a string of reasons
// not to, built at run time from `self.training`, torch.is_grad_enabled(), the devices,
// autocast and whether the weights require grad; where the string is empty the layer
// returns early from inside the branch. Left in the graph, the branch holds everything after
// it (a value such as TransformerEncoder's `src_key_padding_mask_for_layers` comes out of
// it, and no cut can fall between layers), and in evaluation, under no_grad, the fast path
// runs and its nested tensors reach ops that refuse them ("NestedTensorImpl doesn't support
// sizes").
//
// The fast paths compute what the paths beside them compute, fused (torch.nn's
// documentation says so: they apply only where results agree), and ppstage needs dense
// tensors at every cut. So capture decides every such test for the path without them, in
// training and in evaluation alike: a prim::If one of whose branches runs a fast-path op and
// the other none gets the constant condition that runs the other. A branch is judged by
// what it runs, not by its condition, so the rule holds however the library spells the test;
// only torch.nn's own Ifs are decided (by their source file, where the model kept it).
// Only the ops a branch runs itself count: a layer's fast path returns early from a branch
// nested in its test, and everything after the test (in which MultiheadAttention's own fast
// path sits) is one branch of the early return's If. So the innermost tests go first; with
// their fast branches gone (constant propagation), the Ifs around them have two branches
// that return the same values, which foldSameBranches removes, and so on outwards.

namespace {

// The ops only a fast path runs: making nested tensors and undoing them, and the fused
// kernels. (Not _nested_tensor_from_mask_left_aligned: a test of the mask, which the
// reasons not to take the fast path ask about.)
bool isFastPathOp(const torch::jit::Node* node) {
  if (node->kind().ns() != c10::namespaces::aten) return false;
  static const char* const kOps[] = {"_nested_tensor_from_mask",
                                     "_nested_tensor_from_tensor_list",
                                     "to_padded_tensor",
                                     "_transformer_encoder_layer_fwd",
                                     "_native_multi_head_attention",
                                     "_transformer_decoder_only_layer_fwd"};
  const std::string name = node->kind().toUnqualString();
  for (const char* op : kOps) {
    if (name == op) return true;
  }
  return false;
}

// Whether `node` is torch.nn's code, or of unknown origin (a model saved without its
// source): a model's own code that makes nested tensors on purpose keeps its branches.
bool ofTorchNn(const torch::jit::Node* node) {
  const std::shared_ptr<torch::jit::Source> source = node->sourceRange().source();
  if (!source || !source->filename()) return true;
  return source->filename()->find("torch/nn/") != std::string::npos;
}

// Whether `block` itself runs a fast-path op (not in a block nested in it: such a block
// is a test of its own, decided first).
bool runsFastPath(const torch::jit::Block* block) {
  for (const torch::jit::Node* node : block->nodes()) {
    if (isFastPathOp(node)) return true;
  }
  return false;
}

}  // namespace

bool ruleOutFastPaths(torch::jit::Block* block) {
  bool changed = false;
  for (torch::jit::Node* node : block->nodes()) {
    for (torch::jit::Block* sub : node->blocks()) changed |= ruleOutFastPaths(sub);
    if (node->kind() != c10::prim::If || !ofTorchNn(node)) continue;
    const bool then_fast = runsFastPath(node->blocks()[0]);
    const bool else_fast = runsFastPath(node->blocks()[1]);
    if (then_fast == else_fast) continue;
    const std::optional<bool> decided = torch::jit::constant_as<bool>(node->input(0));
    if (decided == else_fast) continue;  // decided already: not a change
    torch::jit::WithInsertPoint guard(node);
    node->replaceInput(0, node->owningGraph()->insertConstant(else_fast));
    changed = true;
  }
  return changed;
}

bool foldSameBranches(torch::jit::Block* block) {
  bool changed = false;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    torch::jit::Node* node = *it++;
    for (torch::jit::Block* sub : node->blocks()) changed |= foldSameBranches(sub);
    if (node->kind() != c10::prim::If) continue;
    torch::jit::Block* then_block = node->blocks()[0];
    torch::jit::Block* else_block = node->blocks()[1];
    if (then_block->nodes().begin() != then_block->nodes().end() ||
        else_block->nodes().begin() != else_block->nodes().end()) {
      continue;
    }
    if (then_block->outputs() != else_block->outputs()) continue;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      node->output(i)->replaceAllUsesWith(then_block->outputs()[i]);
    }
    node->destroy();
    changed = true;
  }
  return changed;
}

}  // namespace ppstage::graph_detail
