// See include/ppstage/compile/recompute.h, Note [Recomputed segments].
#include "ppstage/compile/recompute.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/compile/split_backward.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/graph/random_stream.h"
#include "ppstage/observe/trace.h"

namespace ppstage {

namespace {

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
    RecomputedSegment segment;
    std::vector<c10::IValue> inputs;  // the segment's, tensors detached
    std::vector<int64_t> versions;    // per input: its tensor's version at the forward
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
  void checkVersions() const;

  Setup setup_;
  std::vector<size_t> outputs_;
  // I's split over the rerun's graph, kept for W; the edges I left to it.
  std::unique_ptr<SplitBackward> split_;
  std::vector<size_t> split_weights_;
};

// A kept input changed in place since the forward would rerun the block on other values.
void RecomputeNode::checkVersions() const {
  for (size_t i = 0; i < setup_.inputs.size(); ++i) {
    if (!setup_.inputs[i].isTensor() || !setup_.inputs[i].toTensor().defined()) continue;
    const int64_t now = static_cast<int64_t>(setup_.inputs[i].toTensor()._version());
    PPSTAGE_CHECK(now == setup_.versions[i], setup_.block, ": input ", i,
                  " of a recomputed block was changed in place after its forward (version ",
                  setup_.versions[i], ", now ", now,
                  "): its backward would recompute it from other values; recompute other "
                  "blocks (--train.recompute_blocks) or drop the in-place op");
  }
}

RecomputeNode::Replay RecomputeNode::runAgain(const torch::autograd::variable_list& grads) {
  PPSTAGE_INTERNAL_ASSERT(!setup_.inputs.empty() || setup_.edge_inputs.empty(), setup_.block,
                          ": a recomputed block's backward ran twice (its inputs are gone)");
  checkVersions();
  Replay out;
  std::vector<c10::IValue> args;
  for (size_t source : setup_.segment.sources) args.push_back(setup_.inputs.at(source));
  for (size_t e = 0; e < setup_.edge_inputs.size(); ++e) {
    at::Tensor leaf = args[setup_.edge_inputs[e]].toTensor().detach().requires_grad_(true);
    args[setup_.edge_inputs[e]] = leaf;
    out.leaves.push_back(std::move(leaf));
  }
  const RandomStreamScope stream(setup_.stream);  // the same dropout masks
  const at::AutoGradMode record(true);
  const int64_t start_ns = TraceRecorder::now();
  const auto start = std::chrono::steady_clock::now();
  std::vector<c10::IValue> outs = setup_.segment.run(std::move(args));
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
  Replay replay = runAgain(grads);
  if (replay.roots.empty()) return result;
  std::vector<at::Tensor> needed_leaves, left_leaves;
  for (size_t i : needed) needed_leaves.push_back(replay.leaves[i]);
  for (size_t i : left) left_leaves.push_back(replay.leaves[i]);
  std::vector<at::Tensor> got;
  if (left.empty()) {  // every edge at once: B, or a W that had no I before it
    got = torch::autograd::grad(replay.roots, needed_leaves, replay.root_grads,
                                /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
  } else {
    // Some edges are left for later: I (SplitBackward's input gradients, whose W asks for
    // the weights' after it), or a backward that wants only some inputs' gradients. The
    // rerun's own split keeps what the rest needs, and the inputs go: W reruns nothing.
    split_ = std::make_unique<SplitBackward>();
    split_weights_ = left;
    got = split_->inputGradients(replay.roots, replay.root_grads, needed_leaves, left_leaves);
    setup_.inputs.clear();
  }
  for (size_t k = 0; k < needed.size(); ++k) result[needed[k]] = got[k];
  return result;
}

bool needsGrad(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().requires_grad();
}

// The segment's forward as its reruns run it: the rerun graph on leaves of the inputs,
// recording autograd. Not without autograd: ops choose kernels by requires_grad (matmul
// folds a batch of matrices into one only when no gradient needs the unfolded shape), and
// the values must be the rerun's and those of a run without recomputation, bitwise. The
// recorded graph, and all it saved, goes once the caller detaches the outputs.
std::vector<c10::IValue> forwardOnLeaves(const std::vector<c10::IValue>& inputs,
                                         const RecomputedSegment& segment) {
  std::vector<c10::IValue> leaves = inputs;
  for (c10::IValue& v : leaves) {
    if (needsGrad(v)) v = v.toTensor().detach().requires_grad_(true);
  }
  std::vector<c10::IValue> args;
  for (size_t source : segment.sources) args.push_back(leaves.at(source));
  return segment.run(std::move(args));
}

std::vector<c10::IValue> runAsItIs(const std::vector<c10::IValue>& inputs,
                                   const RecomputedSegment& segment) {
  std::vector<c10::IValue> args;
  for (size_t source : segment.sources) args.push_back(inputs.at(source));
  return segment.run(std::move(args));
}

}  // namespace

std::vector<c10::IValue> runRecomputed(const std::vector<c10::IValue>& inputs,
                                       const RecomputedSegment& segment, const std::string& block,
                                       RecomputeStats& stats, TraceRecorder* trace) {
  // ModelCompiler recomputes no segment that passes tensors inside a list or a tuple (the
  // node would not see their gradients); should one arrive anyway, it runs as it is.
  const bool records = c10::GradMode::is_enabled() &&
                       std::any_of(inputs.begin(), inputs.end(), needsGrad) &&
                       std::none_of(inputs.begin(), inputs.end(), holdsTensor);
  if (!records) return runAsItIs(inputs, segment);
  std::vector<c10::IValue> outputs = forwardOnLeaves(inputs, segment);
  if (std::any_of(outputs.begin(), outputs.end(), holdsTensor)) {
    return runAsItIs(inputs, segment);
  }
  RecomputeNode::Setup setup;
  setup.segment = segment;
  setup.stream = currentRandomStream();
  setup.block = block;
  setup.stats = &stats;
  setup.trace = trace;
  torch::autograd::edge_list edges;
  for (size_t r = 0; r < segment.sources.size(); ++r) {
    const c10::IValue& v = inputs.at(segment.sources[r]);
    if (!needsGrad(v)) continue;
    setup.edge_inputs.push_back(r);
    edges.push_back(torch::autograd::impl::gradient_edge(v.toTensor()));
  }
  for (const c10::IValue& v : inputs) {
    const bool tensor = v.isTensor() && v.toTensor().defined();
    setup.inputs.push_back(tensor ? c10::IValue(v.toTensor().detach()) : v);
    setup.versions.push_back(tensor ? static_cast<int64_t>(v.toTensor()._version()) : 0);
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
