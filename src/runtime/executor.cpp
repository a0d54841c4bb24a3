// See include/ppstage/runtime/executor.h.
#include "ppstage/runtime/executor.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <new>
#include <utility>

#include "action_timer.h"
#include "message_shapes.h"
#include "pending_sends.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/compile/split_backward.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/interrupt.h"
#include "ppstage/core/topology.h"
#include "ppstage/graph/model_failure.h"
#include "ppstage/graph/random_stream.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/observe/trace.h"
#include "ppstage/schedule/early_receives.h"
#include "ppstage/split/stage_module.h"
#include "receive_buffers.h"
#include "stage_failure.h"
#include "step_losses.h"

namespace ppstage {

namespace {

using Clock = std::chrono::steady_clock;

// What one (stage, micro-batch) keeps between its actions.
// One micro-batch of one stage, from its forward (or the receive of its input) to its last
// backward. Shapes are for a micro-batch of b samples; a boundary's tensors are as its
// BoundarySpec says (a GPT block's activation: (b, seq, d_model), float32).
struct MicroBatchState {
  // The stage's inputs, one per boundary input (stage 0: the model's input, (b, ...));
  // received or handed over; leaves for autograd.
  std::vector<at::Tensor> inputs;
  // The pool buffers its RECV_F and RECV_B received into (inputs alias the first; output_grads
  // are the second), given back when the micro-batch is done.
  std::vector<at::Tensor> input_buffers, grad_buffers;
  std::vector<std::shared_ptr<Work>> input_works;
  // Where lengths vary: the shapes the sender says its messages have, and their receives.
  at::Tensor input_shapes, grad_shapes;
  std::vector<std::shared_ptr<Work>> input_shape_works, grad_shape_works;
  // The forward's outputs, one per boundary output (the last stage: the model's outputs,
  // e.g. logits (b, seq, vocab)); autograd roots.
  std::vector<at::Tensor> outputs;
  at::Tensor loss;  // last stage: its share of the step's loss, a scalar () (loss.h)
  // The gradient of each output, shaped like it; undefined: no gradient.
  std::vector<at::Tensor> output_grads;
  std::vector<std::shared_ptr<Work>> output_grad_works;
  // The gradient of each input that needs one, shaped like it; what SEND_B sends.
  std::vector<at::Tensor> input_grads;
  std::unique_ptr<SplitBackward> split;  // from I to W: what W needs (Note [Eager I/W split])
  bool forward_done = false;
  bool weights_done = false;  // W (or B) ran: only input gradients may still wait to be sent
};

ReceivePosting postingFor(const Communicator& comm) {
  ReceivePosting posting;
  posting.keep_communication_order = comm.matchesInPostingOrder();
  return posting;
}

int64_t nanoseconds(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Whether `t` shares memory with one of `buffers` (a received value passed on unchanged).
bool aliasesAny(const at::Tensor& t, const std::vector<at::Tensor>& buffers) {
  for (const at::Tensor& b : buffers) {
    if (b.defined() && t.is_alias_of(b)) return true;
  }
  return false;
}

}  // namespace

struct Executor::Impl {
  Communicator& comm;
  const Topology& topology;
  std::vector<LocalStage> stages;
  ActionList actions;
  ExecutorOptions options;
  std::map<std::pair<int, int>, MicroBatchState> states;  // (stage, micro-batch)
  PendingSends sends;                                     // posted, not yet seen complete
  StepLosses losses;  // the last stage's, read once at the end of the step
  ActionTimer timer;  // the compute actions' seconds, on the device they run on
  std::unique_ptr<ReceiveBuffers> receive_buffers;
  StepStats stats;
  int64_t step = 0;
  const StepData* data = nullptr;  // the step's

  Impl(Communicator& c, const Topology& t, std::vector<LocalStage> s, const ActionList& a,
       ExecutorOptions o)
      : comm(c),
        topology(t),
        stages(std::move(s)),
        actions(o.receives_ahead ? postReceivesEarly(a, postingFor(c)) : a),
        options(o),
        timer(o.device) {
    std::map<ReceivePool, BoundarySpec> specs;
    for (const LocalStage& stage : stages) {
      specs[{stage.module->index, ActionKind::kRecvForward}] = stage.input_spec;
      specs[{stage.module->index, ActionKind::kRecvBackward}] = stage.output_spec;
    }
    receive_buffers =
        std::make_unique<ReceiveBuffers>(actions, specs, o.microbatch_size, o.max_length, o.device);
  }

  LocalStage& local(int stage) { return stages[localPosition(stage)]; }
  // Where `stage` is among this rank's stages.
  size_t localPosition(int stage) const {
    for (size_t i = 0; i < stages.size(); ++i) {
      if (stages[i].module->index == stage) return i;
    }
    PPSTAGE_INTERNAL_FAIL("stage ", stage, " does not run on rank ", topology.rank());
  }
  bool isLast(int stage) const { return stage == topology.numStages() - 1; }
  bool runsHere(int stage) const {
    return stage >= 0 && stage < topology.numStages() && topology.owns(stage);
  }
  MicroBatchState& state(int stage, int mb) { return states[{stage, mb}]; }

  // Waits for the receives `recv` posted; traced as its wait.
  void waitAll(std::vector<std::shared_ptr<Work>>& works, const Action& recv) {
    if (works.empty()) return;
    const int64_t start = options.trace != nullptr ? TraceRecorder::now() : 0;
    const auto begin = Clock::now();
    for (const auto& work : works) work->wait(comm.options().timeout);
    works.clear();
    stats.wait_s[recv.kind] += secondsSince(begin);
    if (options.trace != nullptr) {
      options.trace->add(TraceKind::kWait, recv, start, TraceRecorder::now());
    }
  }

  // Waits for every send of the step, one traced wait per SEND action.
  void waitForSends() { sends.waitAll(comm.options().timeout, stats.wait_s, options.trace); }

  // --- communication ----------------------------------------------------------------------

  // Where lengths vary: micro-batch m's (StepData::lengths); 0 where they do not.
  int64_t lengthOf(int m) const { return options.max_length > 0 ? data->lengths.at(m) : 0; }

  // Where lengths vary: posts a receive of the shapes of `tensors` (the defined ones)
  // into `shapes`.
  void recvShapes(const std::vector<at::Tensor>& tensors, int peer, MessageTag tag,
                  at::Tensor& shapes, std::vector<std::shared_ptr<Work>>& works) {
    if (options.max_length == 0) return;
    shapes = shapesBuffer(tensors, options.device);
    works.push_back(comm.recv(shapes, peer, tag));
  }

  // Where lengths vary: posts a send of the shapes of `tensors` (the defined ones).
  void sendShapes(const std::vector<at::Tensor>& tensors, int peer, MessageTag tag,
                  const Action& send) {
    if (options.max_length == 0) return;
    sends.add(send, comm.send(packShapes(tensors, options.device), peer, tag),
              comm.options().timeout);
  }

  void recvForward(int s, int m) {
    MicroBatchState& st = state(s, m);
    const ReceivePool pool{s, ActionKind::kRecvForward};
    st.input_buffers = receive_buffers->take(pool);
    const std::vector<at::Tensor> into =
        receive_buffers->viewsAt(pool, st.input_buffers, lengthOf(m));
    recvShapes(into, topology.prevRank(s), shapesTag(MessageKind::kActivation, s, m),
               st.input_shapes, st.input_shape_works);
    st.inputs.clear();
    for (size_t i = 0; i < into.size(); ++i) {
      // An alias: forward makes it an autograd leaf, the pool's buffer stays a plain tensor.
      st.inputs.push_back(into[i].detach());
      st.input_works.push_back(comm.recv(into[i], topology.prevRank(s),
                                         {MessageKind::kActivation, s, m, static_cast<int>(i)}));
    }
  }

  void sendForward(int s, int m) {
    MicroBatchState& st = state(s, m);
    PPSTAGE_INTERNAL_ASSERT(st.forward_done, "SEND_F ", s, " ", m, " before its F");
    const Action send{ActionKind::kSendForward, s, m};
    sendShapes(st.outputs, topology.nextRank(s), shapesTag(MessageKind::kActivation, s + 1, m),
               send);
    for (size_t i = 0; i < st.outputs.size(); ++i) {
      sends.add(send,
                comm.send(st.outputs[i].detach(), topology.nextRank(s),
                          {MessageKind::kActivation, s + 1, m, static_cast<int>(i)}),
                comm.options().timeout, aliasesAny(st.outputs[i], st.input_buffers));
    }
    if (options.forward_only) finishForwardOnly(s, m);
  }

  void recvBackward(int s, int m) {
    MicroBatchState& st = state(s, m);
    const BoundarySpec& spec = local(s).output_spec;
    const ReceivePool pool{s, ActionKind::kRecvBackward};
    st.grad_buffers = receive_buffers->take(pool);
    st.output_grads = receive_buffers->viewsAt(pool, st.grad_buffers, lengthOf(m));
    recvShapes(st.output_grads, topology.nextRank(s), shapesTag(MessageKind::kGradient, s + 1, m),
               st.grad_shapes, st.grad_shape_works);
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
      if (!spec.tensors[i].requires_grad) continue;
      st.output_grad_works.push_back(
          comm.recv(st.output_grads[i], topology.nextRank(s),
                    {MessageKind::kGradient, s + 1, m, static_cast<int>(i)}));
    }
  }

  void sendBackward(int s, int m) {
    MicroBatchState& st = state(s, m);
    const BoundarySpec& spec = local(s).input_spec;
    PPSTAGE_INTERNAL_ASSERT(st.input_grads.size() == spec.tensors.size(), "SEND_B ", s, " ", m,
                            " before its input gradients");
    const Action send{ActionKind::kSendBackward, s, m};
    std::vector<at::Tensor> sent(spec.tensors.size());
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
      if (spec.tensors[i].requires_grad) sent[i] = st.input_grads[i];
    }
    sendShapes(sent, topology.prevRank(s), shapesTag(MessageKind::kGradient, s, m), send);
    for (size_t i = 0; i < spec.tensors.size(); ++i) {
      if (!sent[i].defined()) continue;
      sends.add(send,
                comm.send(sent[i], topology.prevRank(s),
                          {MessageKind::kGradient, s, m, static_cast<int>(i)}),
                comm.options().timeout, aliasesAny(sent[i], st.grad_buffers));
    }
    sent.clear();  // before the state goes: no handle of ours may keep a buffer in use
    st.input_grads.clear();
    eraseIfDone(s, m);
  }

  // Waits for (s, m)'s activations (`kind` activation) or gradients: where lengths vary
  // their shapes first, checked against the receives' before any data is waited for.
  void waitForReceived(MessageKind kind, int s, int m) {
    MicroBatchState& st = state(s, m);
    const bool activations = kind == MessageKind::kActivation;
    const Action recv{activations ? ActionKind::kRecvForward : ActionKind::kRecvBackward, s, m};
    std::vector<std::shared_ptr<Work>>& shape_works =
        activations ? st.input_shape_works : st.grad_shape_works;
    if (!shape_works.empty()) {
      waitAll(shape_works, recv);
      const std::string mismatch = shapeMismatch(
          activations ? st.input_shapes : st.grad_shapes, activations ? st.inputs : st.output_grads,
          activations ? local(s).input_spec : local(s).output_spec, kind);
      PPSTAGE_CHECK(mismatch.empty(), where(s, m), mismatch, " (micro-batch ", m, " is ",
                    lengthOf(m), " tokens long): the sender's shapes do not follow the sequence ",
                    "length as the plan says");
    }
    waitAll(activations ? st.input_works : st.output_grad_works, recv);
  }

  // --- compute ----------------------------------------------------------------------------

  void forward(int s, int m, const StepData& data) {
    MicroBatchState& st = state(s, m);
    LocalStage& stage = local(s);
    waitForReceived(MessageKind::kActivation, s, m);
    if (s == 0) {
      st.inputs = data.inputs.at(m);
      for (at::Tensor& input : st.inputs) {
        input = input.to(options.device);
        if (input.is_floating_point() && options.compute_dtype != at::kFloat) {
          input = input.to(options.compute_dtype);
        }
      }
    }
    PPSTAGE_INTERNAL_ASSERT(st.inputs.size() == stage.input_spec.tensors.size(), "stage ", s,
                            " micro-batch ", m, " has ", st.inputs.size(), " inputs, expected ",
                            stage.input_spec.tensors.size());
    const ActionTimer::Start start = timer.start();
    at::AutoGradMode grad_mode(!options.forward_only);
    const RandomStreamScope random(
        {options.seed, step, options.first_microbatch + m,
         options.device.is_cuda() ? static_cast<int>(options.device.index()) : -1});
    for (size_t i = 0; i < st.inputs.size(); ++i) {
      if (stage.input_spec.tensors[i].requires_grad && !options.forward_only) {
        st.inputs[i].requires_grad_(true);
      }
    }
    const std::vector<c10::IValue> args = stage.module->arguments(st.inputs);
    const int64_t bytes_before = tensorBytesNow(options.device);
    std::vector<c10::IValue> outputs;
    try {
      outputs = stage.compiled->run(args);
    } catch (const Error&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      // An interrupted wait inside an op: not a failure to describe (that runs the stage).
      if (interruptPending()) throw StepInterrupted();
      throw Error(where(s, m) + "forward fails: " + describeStageFailure(stage, args, e));
    }
    st.outputs.clear();
    for (const c10::IValue& v : outputs) st.outputs.push_back(v.toTensor());
    double& kept = stats.stage_kept_bytes[localPosition(s)];
    kept = std::max(kept, static_cast<double>(tensorBytesNow(options.device) - bytes_before));
    if (isLast(s)) {
      computeLoss(s, m, st, data);
    } else if (runsHere(s + 1)) {
      // Hand over to the next stage on this rank: detached leaves, as if received.
      MicroBatchState& next = state(s + 1, m);
      next.inputs.clear();
      for (const at::Tensor& out : st.outputs) next.inputs.push_back(out.detach());
    }
    st.forward_done = true;
    record({ActionKind::kForward, s, m}, start);
    if (options.forward_only) {
      st.weights_done = true;  // nothing to differentiate: done once its outputs are sent
      if (isLast(s) || runsHere(s + 1)) finishForwardOnly(s, m);
    }
  }

  // The last stage's loss of micro-batch m, counted into the step's figures; only the loss
  // goes backward, so the other outputs need not stay alive as roots.
  void computeLoss(int s, int m, MicroBatchState& st, const StepData& data) {
    LossTerms terms;
    try {
      terms = lossTerms(options.loss, st.outputs.at(0), data.targets.at(m), options.ignore_index);
    } catch (const Error& e) {
      throw Error(where(s, m) + e.what());
    } catch (const c10::Error& e) {
      throw Error(where(s, m) + "the loss fails: " + rootCause(errorMessage(e)));
    }
    // This micro-batch's share of the step's mean (runtime/loss.h).
    st.loss = terms.sum / static_cast<double>(data.targets_in_step);
    losses.add(options.first_microbatch + m, st.loss, terms.correct);
    st.outputs.clear();
  }

  // Forward only: drops (s, m) once its outputs are handed over or posted.
  void finishForwardOnly(int s, int m) {
    MicroBatchState& st = state(s, m);
    st.outputs.clear();
    st.loss = at::Tensor();
    st.inputs.clear();
    eraseIfDone(s, m);
  }

  std::string where(int s, int m) const {
    return detail::concat("stage ", s, ", micro-batch ", m, ", step ", step + 1, ": ");
  }

  // Autograd roots of stage s's micro-batch `st` and the gradients flowing into them (its
  // output gradients have arrived).
  void roots(int s, MicroBatchState& st, std::vector<at::Tensor>& roots,
             std::vector<at::Tensor>& grads) {
    if (isLast(s)) {
      roots = {st.loss};
      grads = {at::ones_like(st.loss)};
      return;
    }
    PPSTAGE_INTERNAL_ASSERT(st.output_grads.size() == st.outputs.size(), "stage ", s,
                            ": backward before its output gradients");
    for (size_t i = 0; i < st.outputs.size(); ++i) {
      if (!st.output_grads[i].defined() || !st.outputs[i].requires_grad()) continue;
      roots.push_back(st.outputs[i]);
      grads.push_back(st.output_grads[i]);
    }
  }

  // What one backward differentiates for: this stage's inputs that need a gradient (and
  // their slots), its trainable parameters, or both.
  struct GradientTargets {
    std::vector<at::Tensor> wrt;      // the inputs first, then the parameters
    std::vector<size_t> input_slots;  // which input each of the first wrt entries is
    std::vector<at::Tensor*> params;  // the parameters, in the order of the last entries
  };

  GradientTargets targetsOf(MicroBatchState& st, LocalStage& stage, bool inputs, bool weights) {
    GradientTargets t;
    for (size_t i = 0; inputs && i < st.inputs.size(); ++i) {
      if (stage.input_spec.tensors[i].requires_grad && st.inputs[i].requires_grad()) {
        t.wrt.push_back(st.inputs[i]);
        t.input_slots.push_back(i);
      }
    }
    for (StageParameter& p : stage.module->parameters) {
      if (weights && p.is_parameter && p.value.requires_grad()) {
        t.wrt.push_back(p.value);
        t.params.push_back(&p.value);
      }
    }
    return t;
  }

  // Keeps the input gradients of (s, m) for SEND_B, or hands them to stage s-1 when it runs
  // here; a needed gradient autograd did not produce is zeros.
  void keepInputGradients(int s, int m, const GradientTargets& t,
                          const std::vector<at::Tensor>& grads) {
    MicroBatchState& st = state(s, m);
    LocalStage& stage = local(s);
    st.input_grads.assign(st.inputs.size(), at::Tensor());
    for (size_t k = 0; k < t.input_slots.size(); ++k) st.input_grads[t.input_slots[k]] = grads[k];
    for (size_t i = 0; i < st.inputs.size(); ++i) {
      if (stage.input_spec.tensors[i].requires_grad && !st.input_grads[i].defined()) {
        st.input_grads[i] = at::zeros_like(st.inputs[i]);
      }
    }
    if (s > 0 && runsHere(s - 1)) {
      MicroBatchState& prev = state(s - 1, m);
      prev.output_grads = std::move(st.input_grads);
      for (size_t i = 0; i < prev.output_grads.size(); ++i) {
        if (!local(s - 1).output_spec.tensors[i].requires_grad) prev.output_grads[i] = at::Tensor();
      }
      st.input_grads.clear();
    } else if (s == 0) {
      st.input_grads.clear();
    }
  }

  // Adds the weight gradients to the parameters' .grad, then drops what kept the graph of
  // (s, m) alive: it is gone.
  void accumulateWeightGradients(MicroBatchState& st, const GradientTargets& t,
                                 const std::vector<at::Tensor>& grads) {
    for (size_t k = 0; k < t.params.size(); ++k) {
      const at::Tensor& g = grads[t.input_slots.size() + k];
      if (!g.defined()) continue;
      at::Tensor& acc = t.params[k]->mutable_grad();
      if (acc.defined()) {
        acc.add_(g);
      } else {
        acc = g;
      }
    }
    st.outputs.clear();
    st.loss = at::Tensor();
    st.output_grads.clear();
    st.inputs.clear();
    st.forward_done = false;
    st.weights_done = true;
  }

  // The gradients of (s, m) a B, I or W computes, for `targets`: B in one autograd pass,
  // I and W through the micro-batch's SplitBackward.
  std::vector<at::Tensor> gradients(ActionKind kind, MicroBatchState& st, LocalStage& stage,
                                    const GradientTargets& targets) {
    if (kind == ActionKind::kBackwardWeight) {
      PPSTAGE_INTERNAL_ASSERT(st.split != nullptr, "W before its I");
      std::vector<at::Tensor> grads = st.split->weightGradients();
      st.split.reset();
      return grads;
    }
    std::vector<at::Tensor> root_tensors, root_grads;
    roots(stage.module->index, st, root_tensors, root_grads);
    if (kind == ActionKind::kBackwardInput) {
      std::vector<at::Tensor> weights;
      for (at::Tensor* p : targetsOf(st, stage, false, true).params) weights.push_back(*p);
      st.split = std::make_unique<SplitBackward>();
      return st.split->inputGradients(root_tensors, root_grads, targets.wrt, weights);
    }
    if (root_tensors.empty() || targets.wrt.empty()) {
      return std::vector<at::Tensor>(targets.wrt.size());
    }
    return torch::autograd::grad(root_tensors, targets.wrt, root_grads, /*retain_graph=*/false,
                                 /*create_graph=*/false, /*allow_unused=*/true);
  }

  // Input and/or weight gradients of (s, m).
  void backward(ActionKind kind, int s, int m) {
    MicroBatchState& st = state(s, m);
    PPSTAGE_INTERNAL_ASSERT(st.forward_done, kindName(kind), " ", s, " ", m, " before its F");
    if (kind != ActionKind::kBackwardWeight && !isLast(s)) {
      waitForReceived(MessageKind::kGradient, s, m);
    }
    const ActionTimer::Start start = timer.start();
    const bool want_inputs = kind != ActionKind::kBackwardWeight;
    const bool want_weights = kind != ActionKind::kBackwardInput;
    const GradientTargets targets = targetsOf(st, local(s), want_inputs, want_weights);
    std::vector<at::Tensor> grads;
    try {
      grads = gradients(kind, st, local(s), targets);
    } catch (const c10::Error& e) {
      throw Error(where(s, m) + kindName(kind) + " fails: " + rootCause(errorMessage(e)));
    }
    if (want_inputs) keepInputGradients(s, m, targets, grads);
    if (want_weights) accumulateWeightGradients(st, targets, grads);
    record({kind, s, m}, start);
    eraseIfDone(s, m);
  }

  void eraseIfDone(int s, int m) {
    const auto it = states.find({s, m});
    if (it == states.end() || !it->second.weights_done || !it->second.input_grads.empty()) return;
    std::vector<at::Tensor> inputs = std::move(it->second.input_buffers);
    std::vector<at::Tensor> grads = std::move(it->second.grad_buffers);
    states.erase(it);  // the state's own handles go first: then only aliases kept elsewhere count
    if (!inputs.empty())
      receive_buffers->giveBack({s, ActionKind::kRecvForward}, std::move(inputs));
    if (!grads.empty()) receive_buffers->giveBack({s, ActionKind::kRecvBackward}, std::move(grads));
  }

  // The trace keeps the host's span (on a GPU: the launches).
  void record(const Action& action, const ActionTimer::Start& start) {
    const size_t position = localPosition(action.stage);
    timer.stop(start, &stats.stage_compute_s[position][action.kind]);
    stats.stage_compute_count[position][action.kind] += 1;
    if (options.trace != nullptr) {
      options.trace->add(TraceKind::kCompute, action, nanoseconds(start.host),
                         nanoseconds(Clock::now()));
    }
  }

  // Posts a SEND or RECV (traced as its posting).
  void post(const Action& a) {
    const int64_t start = options.trace != nullptr ? TraceRecorder::now() : 0;
    switch (a.kind) {
      case ActionKind::kRecvForward: recvForward(a.stage, a.microbatch); break;
      case ActionKind::kSendForward: sendForward(a.stage, a.microbatch); break;
      case ActionKind::kRecvBackward: recvBackward(a.stage, a.microbatch); break;
      case ActionKind::kSendBackward: sendBackward(a.stage, a.microbatch); break;
      default: PPSTAGE_INTERNAL_FAIL("post of the compute action ", toString(a));
    }
    if (options.trace != nullptr)
      options.trace->add(TraceKind::kPost, a, start, TraceRecorder::now());
  }
};

Executor::Executor(Communicator& comm, const Topology& topology, std::vector<LocalStage> stages,
                   ActionList actions, ExecutorOptions options)
    : impl_(
          std::make_unique<Impl>(comm, topology, std::move(stages), std::move(actions), options)) {}

Executor::~Executor() = default;

StepStats Executor::runStep(int64_t step, const StepData& data) {
  Impl& impl = *impl_;
  impl.timer.finish();  // what an abandoned step left, into its stats, before they go
  impl.stats = StepStats{};
  impl.losses.clear();  // what an abandoned step left
  impl.stats.stage_compute_s.assign(impl.stages.size(), {});
  impl.stats.stage_compute_count.assign(impl.stages.size(), {});
  impl.stats.stage_kept_bytes.assign(impl.stages.size(), 0.0);
  impl.step = step;
  impl.data = &data;
  PPSTAGE_INTERNAL_ASSERT(impl.options.max_length == 0 || !data.lengths.empty(),
                          "micro-batches of different lengths without their lengths");
  if (impl.options.trace != nullptr) impl.options.trace->beginStep(step);
  try {
    for (const Action& a : impl.actions) {
      throwIfInterrupted();  // Note [Abandoning a step]
      switch (a.kind) {
        case ActionKind::kRecvForward:
        case ActionKind::kSendForward:
        case ActionKind::kRecvBackward:
        case ActionKind::kSendBackward: impl.post(a); break;
        case ActionKind::kForward: impl.forward(a.stage, a.microbatch, data); break;
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight: impl.backward(a.kind, a.stage, a.microbatch); break;
      }
    }
    impl.waitForSends();
    impl.losses.readInto(impl.stats);
    impl.timer.finish();
  } catch (const StepInterrupted&) {
    throw;
  } catch (...) {
    // A wait inside an op (a tensor-parallel all-reduce) that was interrupted reaches here
    // as the op's failure: it is the interrupt.
    if (interruptPending()) throw StepInterrupted();
    throw;
  }
  impl.receive_buffers->reclaim();
  PPSTAGE_INTERNAL_ASSERT(impl.states.empty(), impl.states.size(),
                          " micro-batch states left after the step (first: stage ",
                          impl.states.begin()->first.first, " micro-batch ",
                          impl.states.begin()->first.second, ")");
  for (size_t i = 0; i < impl.stages.size(); ++i) {
    for (const ActionKind kind : PerCompute<double>::kinds()) {
      impl.stats.compute_s[kind] += impl.stats.stage_compute_s[i][kind];
      impl.stats.compute_count[kind] += impl.stats.stage_compute_count[i][kind];
    }
  }
  impl.stats.receive_buffers_allocated = impl.receive_buffers->allocated();
  impl.data = nullptr;
  return impl.stats;
}

}  // namespace ppstage
