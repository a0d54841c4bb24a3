// See include/ppstage/compile/recompute.h, Note [Recomputed segments].
#include "ppstage/compile/recompute.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/jit/ir/ir.h>

#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <regex>
#include <utility>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/compile/split_backward.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/graph/random_stream.h"
#include "ppstage/observe/trace.h"

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

namespace {

using Rerun = SegmentRun;

// Whether `v`, not a tensor itself, holds a tensor (a list or tuple of them).
bool holdsTensor(const c10::IValue& v) {
  if (v.isTensor()) return false;
  bool found = false;
  v.visit([&](const c10::IValue& x) {
    found = found || x.isTensor();
    return found;
  });
  return found;
}

bool isDifferentiable(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && at::isFloatingType(v.toTensor().scalar_type());
}

// Note [Recomputed gradients add up as before]
// A tensor that several ops read gets its gradient as a sum, added in the order the
// backward reaches its readers: the last reader's first. When some readers are in a
// recomputed segment and others outside it (a residual stream read by a norm inside the
// block and by the add after it; an input split between the pieces of a selectively
// recomputed block), a rerun with one leaf per input would add its readers' gradients up
// inside, and hand the sum over to be added to the outside ones: (c + (b + a)) where one
// backward computes ((c + b) + a), which differ in the last bit. So the rerun runs a graph
// with one input per reader (inputPerReader, segments.h), the readers last to first, and
// the node has one edge per such input: the engine adds what the node returns in the
// order of its edges, so each reader's gradient arrives where and when it would have.

// The autograd node of one recomputed segment's forward; see Note [Recomputed segments].
// Its edges lead to the rerun graph's inputs whose source requires grad (`edge_inputs`:
// which rerun input each is); its inputs are the segment's differentiable outputs
// (`outputs_`).
class RecomputeNode : public torch::autograd::Node {
 public:
  struct Setup {
    Rerun rerun;                      // on the rerun graph's inputs
    std::vector<size_t> sources;      // per rerun input: the segment input it reads
    std::vector<c10::IValue> inputs;  // the segment's, tensors detached
    std::vector<size_t> edge_inputs;
    RandomStream stream;
    std::string block;
    RecomputeStats* stats = nullptr;
    TraceRecorder* trace = nullptr;
  };
  explicit RecomputeNode(Setup setup) : setup_(std::move(setup)) {}

  std::string name() const override { return "RecomputeBackward"; }
  void release_variables() override {
    setup_.inputs.clear();
    split_.reset();
  }
  void addOutput(size_t index) { outputs_.push_back(index); }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override;

 private:
  struct Replay {  // the forward again, recording autograd, on leaves of the inputs
    std::vector<at::Tensor> leaves;  // one per edge
    std::vector<at::Tensor> roots, root_grads;
  };
  Replay runAgain(const torch::autograd::variable_list& grads);

  Setup setup_;
  std::vector<size_t> outputs_;
  // I's split over the rerun's graph, kept for W; the edges I left to it.
  std::unique_ptr<SplitBackward> split_;
  std::vector<size_t> split_weights_;
};

RecomputeNode::Replay RecomputeNode::runAgain(const torch::autograd::variable_list& grads) {
  PPSTAGE_INTERNAL_ASSERT(!setup_.inputs.empty() || setup_.edge_inputs.empty(), setup_.block,
                          ": a recomputed block's backward ran twice (its inputs are gone)");
  Replay out;
  std::vector<c10::IValue> args;
  for (size_t source : setup_.sources) args.push_back(setup_.inputs.at(source));
  for (size_t e = 0; e < setup_.edge_inputs.size(); ++e) {
    at::Tensor leaf = args[setup_.edge_inputs[e]].toTensor().detach().requires_grad_(true);
    args[setup_.edge_inputs[e]] = leaf;
    out.leaves.push_back(std::move(leaf));
  }
  const RandomStreamScope stream(setup_.stream);  // the same dropout masks
  const at::AutoGradMode record(true);
  const int64_t start_ns = TraceRecorder::now();
  const auto start = std::chrono::steady_clock::now();
  std::vector<c10::IValue> outs = setup_.rerun(std::move(args));
  setup_.stats->seconds += secondsSince(start);
  ++setup_.stats->reruns;
  if (setup_.trace != nullptr) {
    setup_.trace->add(TraceKind::kRecompute, start_ns, TraceRecorder::now());
  }
  for (size_t j = 0; j < outputs_.size(); ++j) {
    if (!grads[j].defined()) continue;
    const at::Tensor& t = outs.at(outputs_[j]).toTensor();
    if (!t.requires_grad()) continue;  // its gradient reaches no input
    out.roots.push_back(t);
    out.root_grads.push_back(grads[j]);
  }
  return out;
}

torch::autograd::variable_list RecomputeNode::apply(torch::autograd::variable_list&& grads) {
  const size_t n = num_outputs();
  torch::autograd::variable_list result(n);
  if (split_) {  // W after I: the weights' gradients from I's rerun
    const std::vector<at::Tensor> w = split_->weightGradients();
    for (size_t i = 0; i < split_weights_.size(); ++i) result[split_weights_[i]] = w[i];
    release_variables();
    return result;
  }
  std::vector<size_t> needed, left;  // edges this call computes, and valid ones it does not
  for (size_t i = 0; i < n; ++i) {
    if (task_should_compute_output(i)) {
      needed.push_back(i);
    } else if (next_edge(i).is_valid()) {
      left.push_back(i);
    }
  }
  if (needed.empty()) return result;
  Replay rerun = runAgain(grads);
  if (rerun.roots.empty()) return result;
  std::vector<at::Tensor> needed_leaves, left_leaves;
  for (size_t i : needed) needed_leaves.push_back(rerun.leaves[i]);
  for (size_t i : left) left_leaves.push_back(rerun.leaves[i]);
  std::vector<at::Tensor> got;
  if (left.empty()) {  // B, or W without I: everything at once
    got = torch::autograd::grad(rerun.roots, needed_leaves, rerun.root_grads,
                                /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
  } else {  // I: the rest of the rerun's graph waits for W
    split_ = std::make_unique<SplitBackward>();
    split_weights_ = left;
    got = split_->inputGradients(rerun.roots, rerun.root_grads, needed_leaves, left_leaves);
  }
  for (size_t k = 0; k < needed.size(); ++k) result[needed[k]] = got[k];
  return result;
}

}  // namespace

std::vector<c10::IValue> runRecomputed(const std::vector<c10::IValue>& inputs, const Rerun& run,
                                       RecomputedRerun rerun, const std::string& block,
                                       RecomputeStats& stats, TraceRecorder* trace) {
  const auto needs_grad = [](const c10::IValue& v) {
    return v.isTensor() && v.toTensor().defined() && v.toTensor().requires_grad();
  };
  bool records = false;
  for (const c10::IValue& v : inputs) {
    // A container of tensors could carry gradients the node would not see: run as it is.
    if (holdsTensor(v)) return run(inputs);
    records = records || needs_grad(v);
  }
  if (!records || !c10::GradMode::is_enabled()) return run(inputs);
  RecomputeNode::Setup setup{std::move(rerun.run),
                             std::move(rerun.sources),
                             {},
                             {},
                             currentRandomStream(),
                             block,
                             &stats,
                             trace};
  torch::autograd::edge_list edges;
  for (size_t r = 0; r < setup.sources.size(); ++r) {
    const c10::IValue& v = inputs.at(setup.sources[r]);
    if (!needs_grad(v)) continue;
    setup.edge_inputs.push_back(r);
    edges.push_back(torch::autograd::impl::gradient_edge(v.toTensor()));
  }
  for (const c10::IValue& v : inputs) {
    setup.inputs.push_back(v.isTensor() ? c10::IValue(v.toTensor().detach()) : v);
  }
  // The forward as the rerun runs it: recording autograd, on leaves of the inputs. Not
  // without autograd: ops choose kernels by requires_grad (matmul folds a batch of
  // matrices into one only when no gradient needs the unfolded shape), and the values must
  // be the rerun's and those of a run without recomputation, bitwise. The recorded graph,
  // and all it saved, goes when the outputs are detached below.
  std::vector<c10::IValue> args = inputs;
  for (c10::IValue& v : args) {
    if (needs_grad(v)) v = v.toTensor().detach().requires_grad_(true);
  }
  std::vector<c10::IValue> outputs = run(std::move(args));
  for (const c10::IValue& v : outputs) {
    if (holdsTensor(v)) return run(inputs);  // as it is, recording autograd
  }
  std::shared_ptr<RecomputeNode> node(new RecomputeNode(std::move(setup)),
                                      torch::autograd::deleteNode);
  node->set_next_edges(std::move(edges));
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!isDifferentiable(outputs[j])) continue;
    // Detached: an output may be an input passed through, whose history must stay its own.
    at::Tensor out = outputs[j].toTensor().detach();
    torch::autograd::create_gradient_edge(out, node);
    node->addOutput(j);
    outputs[j] = out;
  }
  return outputs;
}

}  // namespace ppstage
