// See split_gradient.h and Note [Compiled backward and the I/W split] (split_autodiff.cpp).
#include "split_gradient.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/autodiff.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <mutex>

#include "backward_cut.h"
#include "ppstage/core/error.h"
#include "ppstage/graph/graph_runner.h"

namespace ppstage::compile_detail {

c10::Symbol splitGraphKind() { return c10::Symbol::fromQualString("ppstage::split_graph"); }
c10::Symbol gradientAttr() { return c10::Symbol::attr("split_gradient"); }

namespace {

using torch::autograd::Edge;
using torch::autograd::variable_list;
using torch::jit::Stack;

// Autograd passes gradients as flat tensor lists; a graph value is a Tensor or a Tensor[]
// (aten::split's). A value's shape: -1 for a tensor, n for a list of n.
int64_t shapeOf(const c10::IValue& v) {
  return v.isTensorList() ? static_cast<int64_t>(v.toTensorList().size()) : -1;
}

void flatten(const c10::IValue& v, variable_list& out) {
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
  } else {
    out.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
  }
}

// A gradient for a value of `shape`, flattened: None, or one undefined tensor standing for
// a whole list (a gradient section whose gradients were all undefined returns
// AutogradZero), become as many undefined tensors as the value has.
void flattenAs(const c10::IValue& grad, int64_t shape, variable_list& out) {
  if (grad.isTensorList()) {
    PPSTAGE_INTERNAL_ASSERT(shapeOf(grad) == shape, "a list gradient of ", shapeOf(grad),
                            " tensors for a value of shape ", shape);
    flatten(grad, out);
    return;
  }
  const bool defined = grad.isTensor() && grad.toTensor().defined();
  PPSTAGE_INTERNAL_ASSERT(!defined || shape < 0, "one tensor as the gradient of a list");
  if (shape < 0) {
    out.push_back(defined ? grad.toTensor() : at::Tensor());
    return;
  }
  for (int64_t i = 0; i < shape; ++i) out.emplace_back();
}

std::vector<c10::IValue> unflatten(variable_list&& flat, const std::vector<int64_t>& shape) {
  std::vector<c10::IValue> values;
  auto it = std::make_move_iterator(flat.begin());
  for (const int64_t n : shape) {
    if (n < 0) {
      values.emplace_back(*it++);
      continue;
    }
    c10::List<at::Tensor> list;
    for (int64_t i = 0; i < n; ++i) list.push_back(*it++);
    values.emplace_back(std::move(list));
  }
  return values;
}

c10::IValue detached(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() ? v.toTensor().detach() : v.toTensor();
  if (!v.isTensorList()) return v;
  c10::List<at::Tensor> list;
  for (const at::Tensor& t : v.toTensorList()) list.push_back(t.defined() ? t.detach() : t);
  return list;
}

bool requiresGrad(const c10::IValue& v) {
  variable_list flat;
  flatten(v, flat);
  for (const at::Tensor& t : flat) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

// What one call's two nodes share.
struct CallState {
  std::vector<c10::IValue> captures;  // the backward's saved values; I consumes them
  std::vector<int64_t> vjp_shape;     // the shapes of the outputs whose gradients I takes
  std::vector<int64_t> input_shape;   // the shapes of the inputs whose gradients I gives
  std::vector<int64_t> weight_shape;  // the same for W
  c10::Device device = at::kCPU;      // where W's token lives (the region's inputs' device)
  std::vector<c10::IValue> handoff;   // what W reads, from I until W
  variable_list kept_grads;           // I's gradients the engine did not take then
  bool input_ran = false;
  bool weight_ran = false;
};

}  // namespace

class SplitGradient : public std::enable_shared_from_this<SplitGradient> {
 public:
  // `gradient`: the region differentiated; `weight[i]`: whether region input i is a weight.
  SplitGradient(torch::jit::Gradient gradient, std::vector<bool> weight);

  // Replaces the region's inputs at the top of `stack` by its outputs. With grad mode on
  // and an input that requires grad, the outputs get the two nodes below.
  void run(Stack& stack);

  // I: the backward's inputs -> the activations' gradients, then what W takes from I.
  std::vector<c10::IValue> inputBackward(std::vector<c10::IValue> stack) {
    return input_backward_->run(std::move(stack));
  }
  // W: the handoff -> the weights' gradients.
  std::vector<c10::IValue> weightBackward(std::vector<c10::IValue> handoff) {
    return weight_backward_->run(std::move(handoff));
  }
  const BackwardCut& cut() const { return cut_; }

 private:
  void recordCall(std::vector<c10::IValue>& inputs, std::vector<c10::IValue>& outputs,
                  const std::shared_ptr<CallState>& state);

  torch::jit::Gradient gradient_;
  std::vector<bool> weight_;  // per region input
  BackwardCut cut_;
  std::unique_ptr<GraphRunner> forward_, input_backward_, weight_backward_;
};

namespace {

// Zeros where a graph gave no gradient to an edge this engine run takes (as TorchScript's
// DifferentiableGraphBackward does). Called inside apply.
variable_list filled(variable_list grads, const torch::autograd::Node& node) {
  PPSTAGE_INTERNAL_ASSERT(grads.size() == node.num_outputs(), grads.size(), " gradients for ",
                          node.num_outputs(), " edges");
  for (size_t i = 0; i < grads.size(); ++i) {
    const Edge& edge = node.next_edge(i);
    if (!grads[i].defined() && edge.is_valid() && node.task_should_compute_output(i)) {
      grads[i] = edge.function->input_metadata(edge.input_nr).zeros_like();
    }
  }
  return grads;
}

void refuseCreateGraph() {
  TORCH_CHECK(!c10::GradMode::is_enabled(),
              "compile modes stage and block do not differentiate a backward again "
              "(create_graph); use compile mode none");
}

// I of one call: runs the input-gradient graph, returns the activations' gradients and,
// when the call has weights, a token to its WeightGradients node, and keeps what W reads.
// Called again in the W of an I/W split (the engine runs W from here, see
// Note [Eager I/W split]): I ran, so it returns the gradients that engine run of I did not
// take (towards a weight outside I's region, and W's token); the others went upstream,
// and their edges are cut by then.
class InputGradients : public torch::autograd::Node {
 public:
  InputGradients(std::shared_ptr<SplitGradient> owner, std::shared_ptr<CallState> state)
      : owner_(std::move(owner)), state_(std::move(state)) {}
  std::string name() const override { return "ppstage::SplitGraphInputBackward"; }

  variable_list apply(variable_list&& grads) override {
    refuseCreateGraph();
    CallState& s = *state_;
    if (s.input_ran) return filled(std::move(s.kept_grads), *this);
    TORCH_CHECK(!released_,
                "a compiled graph's backward ran twice over one forward; compile modes stage "
                "and block keep no graph for a second backward (retain_graph)");
    std::vector<c10::IValue> stack = unflatten(std::move(grads), s.vjp_shape);
    for (c10::IValue& v : s.captures) stack.push_back(std::move(v));
    s.captures.clear();
    released_ = true;
    const BackwardCut& cut = owner_->cut();
    s.handoff.resize(cut.handoff.size());
    for (size_t j = 0; j < cut.handoff.size(); ++j) {
      if (cut.handoff[j].backward_input) s.handoff[j] = stack.at(cut.handoff[j].index);
    }
    std::vector<c10::IValue> outs = owner_->inputBackward(std::move(stack));
    const size_t num_grads = cut.input_outputs.size();
    for (size_t j = 0; j < cut.handoff.size(); ++j) {
      if (!cut.handoff[j].backward_input) {
        s.handoff[j] = std::move(outs.at(num_grads + cut.handoff[j].index));
      }
    }
    variable_list result;
    for (size_t k = 0; k < num_grads; ++k) flattenAs(outs[k], s.input_shape[k], result);
    if (!cut.weight_outputs.empty()) result.push_back(at::zeros({}, at::TensorOptions(s.device)));
    s.input_ran = true;
    s.kept_grads.resize(result.size());
    for (size_t i = 0; i < result.size(); ++i) {
      if (!task_should_compute_output(i)) s.kept_grads[i] = result[i];
    }
    return filled(std::move(result), *this);
  }

  void release_variables() override {
    state_->captures.clear();
    released_ = true;
  }

 private:
  std::shared_ptr<SplitGradient> owner_;
  std::shared_ptr<CallState> state_;
  bool released_ = false;
};

// W of one call: runs the weight-gradient graph on what I kept.
class WeightGradients : public torch::autograd::Node {
 public:
  WeightGradients(std::shared_ptr<SplitGradient> owner, std::shared_ptr<CallState> state)
      : owner_(std::move(owner)), state_(std::move(state)) {}
  std::string name() const override { return "ppstage::SplitGraphWeightBackward"; }

  variable_list apply(variable_list&& /*token*/) override {
    refuseCreateGraph();
    CallState& s = *state_;
    TORCH_CHECK(s.input_ran && !s.weight_ran,
                "a compiled graph's weight gradients ran before its input gradients, or "
                "twice over one forward");
    std::vector<c10::IValue> outs = owner_->weightBackward(std::move(s.handoff));
    s.weight_ran = true;
    release_variables();
    variable_list result;
    for (size_t k = 0; k < outs.size(); ++k) flattenAs(outs[k], s.weight_shape[k], result);
    return filled(std::move(result), *this);
  }

  void release_variables() override {
    state_->handoff.clear();
    state_->kept_grads.clear();
  }

 private:
  std::shared_ptr<SplitGradient> owner_;
  std::shared_ptr<CallState> state_;
};

void addEdges(torch::autograd::Node& node, const c10::IValue& input) {
  variable_list flat;
  flatten(input, flat);
  for (const at::Tensor& t : flat) {
    node.add_next_edge(t.defined() ? torch::autograd::impl::gradient_edge(t) : Edge{});
  }
}

// The output gets `node` as its grad_fn; integral outputs (requires_grad is a guess made
// before the types are known) take no gradient.
void addInput(torch::autograd::Node& node, const std::shared_ptr<torch::autograd::Node>& self,
              c10::IValue& output) {
  variable_list flat;
  flatten(output, flat);
  for (at::Tensor& t : flat) {
    if (t.defined() && at::isFloatingType(t.scalar_type())) {
      torch::autograd::create_gradient_edge(t, self);
    } else {
      node.add_input_metadata(torch::autograd::Node::undefined_input{});
    }
  }
}

// differentiate returns the backward's gradients as one tuple; the cut wants them apart.
void untuple(torch::jit::Graph& backward) {
  if (backward.outputs().size() != 1) return;
  torch::jit::Node* tuple = backward.outputs()[0]->node();
  if (tuple->kind() != c10::prim::TupleConstruct) return;
  backward.eraseOutput(0);
  for (torch::jit::Value* v : tuple->inputs()) backward.registerOutput(v);
  if (!tuple->output()->hasUses()) tuple->destroy();
}

}  // namespace

SplitGradient::SplitGradient(torch::jit::Gradient gradient, std::vector<bool> weight)
    : gradient_(std::move(gradient)), weight_(std::move(weight)) {
  untuple(*gradient_.df);
  std::vector<bool> weight_output;
  for (const size_t input : gradient_.df_output_vjps) weight_output.push_back(weight_.at(input));
  cut_ = cutBackward(*gradient_.df, weight_output);
  forward_ = std::make_unique<GraphRunner>(gradient_.f, "split forward", /*profiling=*/true);
  input_backward_ =
      std::make_unique<GraphRunner>(cut_.input_graph, "split input backward", /*profiling=*/true);
  weight_backward_ =
      std::make_unique<GraphRunner>(cut_.weight_graph, "split weight backward", /*profiling=*/true);
}

void SplitGradient::recordCall(std::vector<c10::IValue>& inputs, std::vector<c10::IValue>& outputs,
                               const std::shared_ptr<CallState>& state) {
  auto input_node = std::make_shared<InputGradients>(shared_from_this(), state);
  for (const size_t k : cut_.input_outputs) {
    const c10::IValue& input = inputs[gradient_.df_output_vjps[k]];
    state->input_shape.push_back(shapeOf(input));
    addEdges(*input_node, input);
  }
  if (!cut_.weight_outputs.empty()) {
    auto weight_node = std::make_shared<WeightGradients>(shared_from_this(), state);
    for (const size_t k : cut_.weight_outputs) {
      const c10::IValue& input = inputs[gradient_.df_output_vjps[k]];
      state->weight_shape.push_back(shapeOf(input));
      addEdges(*weight_node, input);
      if (input.isTensor() && input.toTensor().defined()) state->device = input.toTensor().device();
    }
    const uint32_t token =
        weight_node->add_input_metadata(at::zeros({}, at::TensorOptions(state->device)));
    input_node->add_next_edge(Edge(std::move(weight_node), token));
  }
  for (const size_t i : gradient_.df_input_vjps) {
    state->vjp_shape.push_back(shapeOf(outputs[i]));
    addInput(*input_node, input_node, outputs[i]);
  }
  for (const size_t i : gradient_.df_input_captured_outputs) {
    state->captures.push_back(detached(outputs[i]));  // no grad_fn: no cycle through I
  }
}

void SplitGradient::run(Stack& stack) {
  const size_t n = gradient_.f->inputs().size();
  PPSTAGE_INTERNAL_ASSERT(stack.size() >= n, "split_graph: ", stack.size(), " values for ", n,
                          " inputs");
  std::vector<c10::IValue> inputs(std::make_move_iterator(stack.end() - static_cast<long>(n)),
                                  std::make_move_iterator(stack.end()));
  stack.resize(stack.size() - n);
  bool record = false;
  if (c10::GradMode::is_enabled()) {
    for (const size_t i : gradient_.df_output_vjps) record = record || requiresGrad(inputs[i]);
  }
  std::vector<c10::IValue> detached_inputs;
  for (const c10::IValue& v : inputs) detached_inputs.push_back(detached(v));
  auto state = std::make_shared<CallState>();
  if (record) {
    // The backward graph's inputs are, in this order (torch::jit::Gradient's contract): the
    // output gradients (df_input_vjps), the captured inputs (df_input_captured_inputs, in
    // its order), then the captured outputs (df_input_captured_outputs, in its order).
    // `captures` is the tail after the gradients: the inputs go in first, here, and
    // recordCall appends the outputs after the forward ran; I pushes them in that order.
    for (const size_t i : gradient_.df_input_captured_inputs) {
      state->captures.push_back(detached_inputs[i]);
    }
  }
  std::vector<c10::IValue> outputs;
  {
    c10::AutoGradMode no_grad(false);  // the forward records nothing: the nodes stand for it
    outputs = forward_->run(std::move(detached_inputs));
  }
  if (record) recordCall(inputs, outputs, state);
  for (size_t i = 0; i < gradient_.f_real_outputs; ++i) stack.push_back(std::move(outputs[i]));
}

namespace {

// What a split_graph node's attribute holds.
struct SplitGradientCapsule : torch::CustomClassHolder {
  std::shared_ptr<SplitGradient> split;
};

}  // namespace

c10::IValue makeSplitGradient(const std::shared_ptr<torch::jit::Graph>& region,
                              std::vector<bool> weight) {
  std::shared_ptr<torch::jit::Graph> copy = region->copy();  // differentiate takes it over
  torch::jit::Gradient gradient;
  try {
    gradient = torch::jit::differentiate(copy);
  } catch (const std::exception& e) {  // c10::Error, or the std::runtime_error autodiff throws
    throw NotDifferentiable(e.what());
  }
  auto capsule = c10::make_intrusive<SplitGradientCapsule>();
  capsule->split = std::make_shared<SplitGradient>(std::move(gradient), std::move(weight));
  return c10::IValue::make_capsule(std::move(capsule));
}

void registerSplitGraphOperator() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::jit::registerOperator(torch::jit::Operator(
        splitGraphKind(),
        [](const torch::jit::Node* node) -> torch::jit::Operation {
          const auto capsule = c10::static_intrusive_pointer_cast<SplitGradientCapsule>(
              node->ival(gradientAttr()).toCapsule());
          std::shared_ptr<SplitGradient> split = capsule->split;
          return [split](Stack& stack) { split->run(stack); };
        },
        c10::AliasAnalysisKind::CONSERVATIVE));
  });
}

}  // namespace ppstage::compile_detail
