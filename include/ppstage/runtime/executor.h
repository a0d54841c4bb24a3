// runtime::Executor: runs one rank's lowered action list (schedule/lowering.h) for one
// optimizer step over the stages this rank owns.
//
// What each action does, for stage s and micro-batch m:
//   RECV_F  post receives for s's inputs, into buffers of the rank's receive pools
//   F       wait for the inputs, run the stage forward recording autograd (random ops draw
//           from the micro-batch's RandomStream); keep the inputs
//           (autograd leaves) and outputs backward needs. The last stage computes m's share
//           of the step's loss against its targets (runtime/loss.h). When s+1 runs on
//           this rank, its inputs are handed over directly (detached leaves, no copy).
//   SEND_F  post sends of s's outputs
//   RECV_B  post receives for the gradients of s's outputs
//   B       input and weight gradients in one autograd pass; weight gradients accumulate in
//           the parameters' .grad, input gradients go to SEND_B or to stage s-1 on this rank
//   I       input gradients only, keeping what W needs (compile/split_backward.h: I + W
//           walk the graph once between them, Note [Eager I/W split])
//   W       weight gradients only, from where I left them; then m's autograd graph is freed
//   SEND_B  post sends of the input gradients
// A tensor whose BoundarySpec says requires_grad always gets a gradient message (zeros when
// autograd produced none), so both sides agree on what crosses without looking at values.
// Where micro-batches differ in length, both sides know each one's (StepData::lengths):
// the receiver posts receives of exactly its shapes, and the sender sends the shapes it
// has first, in one small message, which the receiver checks before it waits for the
// tensors: a shape that differs is an error naming both, never a truncated tensor.
//
// Receives are posted ahead of where the lowering put them, as far as the receive buffers
// allow (postReceivesEarly, schedule/early_receives.h; on a communicator that matches in
// posting order, only ahead of compute). The buffers are allocated once, at construction,
// one pool per (stage, direction) sized for the most the list holds at once, and reused
// from step to step: a micro-batch's buffers go back when its last action is done, and
// one still aliased then (a received value the stage passes on, which its SEND_F holds
// until the step ends) goes back at the end of the step. Sends are waited for at the end
// of the step: a send's Work keeps its tensor alive until then.
//
// Gradients accumulate over micro-batches; with each micro-batch's loss divided by the
// targets of the whole step (StepData::targets_in_step, over all replicas) a pipelined step
// accumulates what one full-batch step of the mean loss computes.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "ppstage/comm/boundary_spec.h"
#include "ppstage/compile/compiled_stage.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/schedule/action.h"
#include "ppstage/schedule/per_kind.h"

namespace ppstage {

class Communicator;
class Topology;
class TraceRecorder;
struct StageModule;

// A stage this rank runs: the splitter's module, compiled.
struct LocalStage {
  StageModule* module = nullptr;  // parameters are updated in place by the optimizer
  // Module path of each of the model's calls (ModelGraph::calls, which the module's
  // node_call indexes): what names a failing node's module.
  std::vector<std::string> call_paths;
  std::unique_ptr<CompiledStage> compiled;
  BoundarySpec input_spec;   // the boundary in front of the stage
  BoundarySpec output_spec;  // the boundary after it (described as the next stage's inputs)
};

struct ExecutorOptions {
  // Where the stages' tensors are (--train.device): stage 0's inputs and the last stage's
  // targets are copied there, receive buffers and the shapes of messages made there.
  at::Device device = at::kCPU;
  int64_t microbatch_size = 1;
  LossKind loss = LossKind::kCrossEntropy;
  int64_t ignore_index = -100;  // cross_entropy: targets equal to it do not count
  // What the stages compute in (--train.precision): floating model inputs are cast to it
  // on stage 0. lossTerms computes cross_entropy and mse in fp32 whatever it is.
  at::ScalarType compute_dtype = at::kFloat;
  // The random stream of each forward (see ppstage/graph/random_stream.h): micro-batch m of
  // step t draws from (seed, t, first_microbatch + m).
  int64_t seed = 0;
  int64_t first_microbatch = 0;  // this replica's first global micro-batch: dp rank x M
  // Records every action, post and wait (--output.trace); null: nothing is recorded.
  TraceRecorder* trace = nullptr;
  // Receives posted ahead (--comm.receives_ahead); false: where the lowering put them.
  bool receives_ahead = true;
  // Evaluation: the list holds only RECV_F, F and SEND_F; forwards record no autograd
  // graph, and a micro-batch is dropped once its outputs are passed on or its loss taken.
  bool forward_only = false;
  // Micro-batches that differ in length (--data.seq_len_policy bucket or variable): the
  // longest (--model.seq_len). Receive buffers hold a micro-batch of it, and each message
  // is received into a view of them at its micro-batch's length (StepData::lengths),
  // after a message with its shapes, checked against that length. 0: every micro-batch
  // has the plan's shape, and messages carry no shapes.
  int64_t max_length = 0;
};

// One step's data on this rank.
struct StepData {
  // [m][i]: micro-batch m of the model's input i (stage 0; ModelGraph::input_names order).
  std::vector<std::vector<at::Tensor>> inputs;
  std::vector<at::Tensor> targets;  // [m]: its targets (the last stage)
  // The targets that count in the whole step, over every micro-batch and replica
  // (countTargets): each micro-batch's loss sum is divided by it.
  int64_t targets_in_step = 1;
  // [m]: micro-batch m's sequence length, on every rank, where micro-batches differ in
  // length (ExecutorOptions::max_length); empty otherwise.
  std::vector<int64_t> lengths;
  // The tokens of the step's global batch (every replica's), for throughput: documents'
  // own (`tokens`) and with their padding (`padded_tokens`).
  int64_t tokens = 0;
  int64_t padded_tokens = 0;
};

// What one step cost on this rank.
struct StepStats {
  double loss_sum = 0;  // sum of the micro-batches' shares of the step's loss (last stage)
  int64_t correct = 0;  // cross_entropy: counted targets predicted right (last stage)
  // The first global micro-batch (first_microbatch + m) whose loss was NaN or inf; -1: none.
  int64_t first_nonfinite_microbatch = -1;
  // Per compute kind: seconds and count, summed over this rank's stages. The seconds are
  // the host's clock on the CPU, CUDA events on a GPU (runtime/action_timer.h).
  PerCompute<double> compute_s;
  PerCompute<int64_t> compute_count;
  // The same per stage of this rank (in the order of the executor's stages).
  std::vector<PerCompute<double>> stage_compute_s;
  std::vector<PerCompute<int64_t>> stage_compute_count;
  // Per stage of this rank: the most tensor bytes one micro-batch's F left alive (what it
  // keeps for its backward, and its outputs), by the counting allocator
  // (observe/tensor_memory.h; 0 where it is not installed).
  std::vector<double> stage_kept_bytes;
  // Per transfer kind: seconds spent waiting for its transfers to complete.
  PerTransfer<double> wait_s;
  // Receive buffers allocated over the executor's life so far (ReceiveBuffers::allocated):
  // after the first step it only grows where a buffer was still held when given back.
  int64_t receive_buffers_allocated = 0;
  double busy_s() const {
    double busy = 0;
    for (const double seconds : compute_s) busy += seconds;
    return busy;
  }
};

class Executor {
 public:
  // `stages` are this rank's, in increasing stage order; `actions` its lowered list.
  Executor(Communicator& comm, const Topology& topology, std::vector<LocalStage> stages,
           ActionList actions, ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Step `step` (0-based) over `data` (its inputs are only read when this rank runs stage
  // 0, its targets when it runs the last stage). Throws CommError when a peer does not answer in
  // time, and ppstage::Error naming the stage, micro-batch, step and cause when the model fails (a
  // token id beyond an embedding, ...); for a forward also the failing module and op.
  StepStats runStep(int64_t step, const StepData& data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppstage
