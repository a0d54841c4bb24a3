// See include/ppstage/compile/recompute_choice.h.
#include "ppstage/compile/recompute_choice.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <regex>

#include "ppstage/core/error.h"

namespace ppstage {

namespace {

// "N" or "N0,N1,...": digits and commas only.
bool isCountList(const std::string& spec) {
  return !spec.empty() && spec.find_first_not_of("0123456789,") == std::string::npos;
}

std::vector<int64_t> parseCounts(const std::string& spec) {
  std::vector<int64_t> counts;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    PPSTAGE_CHECK(!item.empty() && item.size() < 10, "--train.recompute_blocks '", spec,
                  "': a count per stage is N or N0,N1,... (blocks of each stage)");
    counts.push_back(std::stoll(item));
    start = comma + 1;
  }
  return counts;
}

// The model's blocks (calls), in the order its forward runs them.
std::vector<int> blockCalls(const ModelGraph& model, const std::vector<bool>& blocks) {
  std::vector<int> calls;
  std::vector<bool> seen(blocks.size(), false);
  for (const torch::jit::Node* n : model.graph->nodes()) {
    const auto it = model.node_call.find(n);
    if (it == model.node_call.end()) continue;
    for (int c = it->second; c >= 0; c = model.calls[static_cast<size_t>(c)].parent) {
      const auto k = static_cast<size_t>(c);
      if (blocks[k] && !seen[k]) {
        seen[k] = true;
        calls.push_back(c);
      }
    }
  }
  return calls;
}

std::string someBlockPaths(const ModelGraph& model, const std::vector<int>& calls) {
  std::string out;
  for (size_t i = 0; i < calls.size() && i < 4; ++i) {
    out += (i > 0 ? ", " : "") + model.calls[static_cast<size_t>(calls[i])].path;
  }
  return out + (calls.size() > 4 ? ", ..." : "");
}

}  // namespace

RecomputeChoice::RecomputeChoice(RecomputePolicy policy, const std::string& spec,
                                 const ModelGraph& model, const std::vector<bool>& blocks)
    : policy_(policy) {
  if (policy == RecomputePolicy::kNone) return;
  const std::vector<int> calls = blockCalls(model, blocks);
  PPSTAGE_CHECK(!calls.empty(), "--train.recompute ", toString(policy),
                ": the model has no repeated blocks to recompute (no module type has two or "
                "more calls that together hold a tenth of its ops); name them with "
                "--compile.block_pattern");
  by_call_.assign(blocks.size(), false);
  if (isCountList(spec)) {
    count_per_stage_ = parseCounts(spec);
    return;
  }
  const std::string every = "every:";
  if (spec.rfind(every, 0) == 0) {
    const std::string n = spec.substr(every.size());
    PPSTAGE_CHECK(
        isCountList(n) && n.find(',') == std::string::npos && n.size() < 10 && std::stoll(n) >= 1,
        "--train.recompute_blocks '", spec, "': every:N needs a whole N >= 1");
    const int64_t period = std::stoll(n);
    for (size_t i = 0; i < calls.size(); ++i) {
      by_call_[static_cast<size_t>(calls[i])] = (static_cast<int64_t>(i) + 1) % period == 0;
    }
    return;
  }
  std::regex pattern;
  try {
    pattern = std::regex(spec.empty() ? std::string(".*") : spec, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(detail::concat("--train.recompute_blocks '", spec,
                               "' is not a regular expression: ", e.what()));
  }
  bool any = false;
  for (int c : calls) {
    const bool match = std::regex_match(model.calls[static_cast<size_t>(c)].path, pattern);
    by_call_[static_cast<size_t>(c)] = match;
    any = any || match;
  }
  PPSTAGE_CHECK(any, "--train.recompute_blocks '", spec, "' matches no block; the model's ",
                calls.size(), " blocks are ", someBlockPaths(model, calls));
}

bool RecomputeChoice::recomputes(int call, int stage, int index_in_stage) const {
  if (!any()) return false;
  if (!count_per_stage_.empty()) {
    if (count_per_stage_.size() == 1) return index_in_stage < count_per_stage_[0];
    const auto s = static_cast<size_t>(stage);
    return s < count_per_stage_.size() && index_in_stage < count_per_stage_[s];
  }
  return by_call_.at(static_cast<size_t>(call));
}

}  // namespace ppstage
