// --train.recompute_blocks: which of a model's blocks activation recomputation applies to
// (recompute.h), resolved once against the blocks findBlocks found (segments.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ppstage/config/config.h"
#include "ppstage/graph/model_graph.h"

namespace ppstage {

// --train.recompute and --train.recompute_blocks resolved against a model's blocks.
class RecomputeChoice {
 public:
  RecomputeChoice() = default;  // nothing recomputes
  // `blocks`: findBlocks over `model` (segments.h). Throws ppstage::Error, one line, for a
  // bad --train.recompute_blocks, a pattern that matches no block, and recomputation on a
  // model without blocks (with the reason).
  RecomputeChoice(RecomputePolicy policy, const std::string& spec, const ModelGraph& model,
                  const std::vector<bool>& blocks);

  RecomputePolicy policy() const { return policy_; }
  bool any() const { return policy_ != RecomputePolicy::kNone; }
  // Whether the block that is call `call` of the model, the `index_in_stage`-th block (from
  // 0) of stage `stage`, recomputes.
  bool recomputes(int call, int stage, int index_in_stage) const;

 private:
  RecomputePolicy policy_ = RecomputePolicy::kNone;
  std::vector<bool> by_call_;             // a pattern, every:N or all: per model call
  std::vector<int64_t> count_per_stage_;  // a count: per stage (0 past the list)
};

}  // namespace ppstage
