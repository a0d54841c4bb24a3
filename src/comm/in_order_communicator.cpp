// See include/ppstage/comm/in_order_communicator.h, Note [NCCL's posting order].
//
// One mutex and condition variable per group guard the streams. Every post and every wait
// runs progress(): it delivers each send that meets its receive at the heads of both
// streams and pops the head groups that finished, until nothing changes.
#include "ppstage/comm/in_order_communicator.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>

#include "ppstage/comm/local_communicator.h"
#include "ppstage/core/error.h"

namespace ppstage {
namespace {

// One posted operation; `sequence`: it is the k-th of its kind between its two ranks.
struct Op {
  P2pOp::Kind kind = P2pOp::Kind::kSend;
  at::Tensor tensor;
  int peer = 0;
  MessageTag tag;
  int64_t sequence = 0;
  bool done = false;
  std::string error;  // set when it met an operation that does not match it
};

using Group = std::vector<std::shared_ptr<Op>>;
using Clock = std::chrono::steady_clock;
using Lock = std::unique_lock<std::mutex>;

}  // namespace

struct InOrderGroup::State {
  State(
      int size, CommOptions options,
      std::shared_ptr<std::atomic<int64_t>> all_reduces = std::make_shared<std::atomic<int64_t>>())
      : size(size),
        options(options),
        all_reduces(std::move(all_reduces)),
        streams(static_cast<size_t>(size)),
        sends(static_cast<size_t>(size), std::vector<int64_t>(static_cast<size_t>(size))),
        receives(sends),
        splits(static_cast<size_t>(size)) {}

  const int size;
  const CommOptions options;
  // Every rank's allReduceSum calls, in this group and every group split from it.
  const std::shared_ptr<std::atomic<int64_t>> all_reduces;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::deque<Group>> streams;  // [rank]: its posted groups, head first
  // [rank][peer]: sends to peer, receives from peer, posted so far
  std::vector<std::vector<int64_t>> sends, receives;
  // The groups split() made, by (the rank's split count, color): their members share one.
  std::vector<int64_t> splits;
  std::map<std::pair<int64_t, int>, std::shared_ptr<State>> children;
  bool aborted = false;
  std::string abort_reason;
};

namespace {

using State = InOrderGroup::State;

std::string describeOp(int rank, const Op& op) {
  const bool send = op.kind == P2pOp::Kind::kSend;
  return detail::concat("rank ", rank, (send ? " sending " : " receiving "), op.tag.describe(),
                        (send ? " to rank " : " from rank "), op.peer);
}

// With the lock held: where each rank's stream is stuck, its head's first unfinished op.
std::string describeHeads(const State& state) {
  std::string heads;
  for (int r = 0; r < state.size; ++r) {
    if (state.streams[r].empty()) continue;
    for (const auto& op : state.streams[r].front()) {
      if (op->done) continue;
      heads += detail::concat(heads.empty() ? "" : "; ", describeOp(r, *op));
      break;
    }
  }
  return heads.empty() ? "every stream is empty" : "stream heads: " + heads;
}

// Completes the send of `from` (at the head of its stream) and the receive it meets. Runs
// in whichever rank's thread made progress, so no autograd records the copy and its
// failure is the two operations' error, not that thread's.
void deliver(int from, Op& send, Op& recv) {
  if (!(send.tag == recv.tag) || send.tensor.scalar_type() != recv.tensor.scalar_type() ||
      send.tensor.numel() != recv.tensor.numel()) {
    const std::string error =
        detail::concat("posting orders differ: send ", send.sequence + 1, " from rank ", from,
                       " to rank ", send.peer, " is ", send.tag.describe(), " (",
                       send.tensor.numel(), " ", c10::toString(send.tensor.scalar_type()),
                       "), the receive it meets expects ", recv.tag.describe(), " (",
                       recv.tensor.numel(), " ", c10::toString(recv.tensor.scalar_type()), ")");
    send.error = recv.error = error;
  } else {
    try {
      at::NoGradGuard no_grad;
      recv.tensor.copy_(send.tensor.reshape(recv.tensor.sizes()));
    } catch (const std::exception& e) {
      send.error = recv.error = detail::concat("delivering ", send.tag.describe(), ": ", e.what());
    }
  }
  send.done = recv.done = true;
  send.tensor = recv.tensor = at::Tensor();
}

// With the lock held: `state` and every group split from it, aborted for `reason`.
void abortAll(State& state, const std::string& reason) {
  state.aborted = true;
  state.abort_reason = reason;
  for (auto& [key, child] : state.children) {
    std::lock_guard<std::mutex> lock(child->mutex);
    abortAll(*child, reason);
    child->changed.notify_all();
  }
}

// With the lock held: delivers every send that meets its receive at the heads of both
// streams and pops the finished head groups, until nothing changes.
void progress(State& state) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < state.size; ++r) {
      if (state.streams[r].empty()) continue;
      for (const auto& send : state.streams[r].front()) {
        if (send->done || send->kind != P2pOp::Kind::kSend) continue;
        if (state.streams[send->peer].empty()) continue;
        for (const auto& recv : state.streams[send->peer].front()) {
          if (!recv->done && recv->kind == P2pOp::Kind::kRecv && recv->peer == r &&
              recv->sequence == send->sequence) {
            deliver(r, *send, *recv);
            changed = true;
            break;
          }
        }
      }
    }
    for (auto& stream : state.streams) {
      while (!stream.empty() &&
             std::all_of(stream.front().begin(), stream.front().end(),
                         [](const std::shared_ptr<Op>& op) { return op->done; })) {
        stream.pop_front();
        changed = true;
      }
    }
  }
}

// Waits until `ready()`, running progress; throws CommError on timeout (with the stream
// heads) or abort.
template <typename Ready>
void waitUntil(State& state, std::chrono::milliseconds timeout, const std::string& what,
               const Ready& ready) {
  Lock lock(state.mutex);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    progress(state);
    if (ready()) break;
    if (state.aborted) throw CommError(what + ": " + state.abort_reason);
    if (state.changed.wait_until(lock, deadline) == std::cv_status::timeout) {
      progress(state);
      if (ready()) break;
      if (state.aborted) throw CommError(what + ": " + state.abort_reason);
      throw timeoutError(timeout, what + " (" + describeHeads(state) + ")");
    }
  }
  state.changed.notify_all();
}

class InOrderWork final : public Work {
 public:
  InOrderWork(std::shared_ptr<State> state, std::shared_ptr<Op> op, int rank)
      : state_(std::move(state)), op_(std::move(op)), what_(describeOp(rank, *op_)) {}

  bool isCompleted() override {
    Lock lock(state_->mutex);
    progress(*state_);
    return op_->done;
  }

  void wait(std::chrono::milliseconds timeout) override {
    waitUntil(*state_, timeout, what_, [this] { return op_->done; });
    if (!op_->error.empty()) throw CommError(op_->error);
  }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Op> op_;
  std::string what_;
};

class InOrderCommunicator final : public Communicator {
 public:
  InOrderCommunicator(std::shared_ptr<State> state, int rank,
                      std::unique_ptr<Communicator> collectives)
      : Communicator(state->options),
        state_(std::move(state)),
        rank_(rank),
        collectives_(std::move(collectives)) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size; }
  bool matchesInPostingOrder() const override { return true; }

  std::shared_ptr<Work> send(const at::Tensor& tensor, int dst, MessageTag tag) override {
    return batch({P2pOp{P2pOp::Kind::kSend, tensor, dst, tag}}).front();
  }
  std::shared_ptr<Work> recv(const at::Tensor& tensor, int src, MessageTag tag) override {
    return batch({P2pOp{P2pOp::Kind::kRecv, tensor, src, tag}}).front();
  }

  std::vector<std::shared_ptr<Work>> batch(const std::vector<P2pOp>& ops) override {
    std::vector<std::shared_ptr<Work>> works;
    Group group;
    {
      Lock lock(state_->mutex);
      for (const P2pOp& p : ops) {
        PPSTAGE_INTERNAL_ASSERT(p.peer >= 0 && p.peer < state_->size, "rank ", p.peer,
                                " outside a group of ", state_->size);
        const bool send = p.kind == P2pOp::Kind::kSend;
        int64_t& count = (send ? state_->sends : state_->receives)[rank_][p.peer];
        auto op = std::make_shared<Op>();
        op->kind = p.kind;
        op->tensor = p.tensor.detach();
        op->peer = p.peer;
        op->tag = p.tag;
        op->sequence = count++;
        group.push_back(op);
        works.push_back(std::make_shared<InOrderWork>(state_, op, rank_));
      }
      if (!group.empty()) state_->streams[rank_].push_back(std::move(group));
      progress(*state_);
    }
    state_->changed.notify_all();
    return works;
  }

  void allReduceSum(const std::vector<at::Tensor>& tensors) override {
    waitForStream("in an all-reduce");
    collectives_->allReduceSum(tensors);
    ++*state_->all_reduces;
  }
  void broadcast(std::string& bytes, int root) override {
    waitForStream("in a broadcast");
    collectives_->broadcast(bytes, root);
  }
  void barrier() override {
    waitForStream("in a barrier");
    collectives_->barrier();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    waitForStream("in a split");
    std::unique_ptr<Communicator> inner = collectives_->split(color, key);
    std::shared_ptr<State> child;
    {
      Lock lock(state_->mutex);
      std::shared_ptr<State>& shared = state_->children[{state_->splits[rank_]++, color}];
      if (shared == nullptr) {
        shared = std::make_shared<State>(inner->size(), options(), state_->all_reduces);
      }
      child = shared;
    }
    const int rank = inner->rank();
    return std::make_unique<InOrderCommunicator>(child, rank, std::move(inner));
  }

  void abort(int exit_code) override {
    {
      Lock lock(state_->mutex);
      abortAll(*state_, detail::concat("rank ", rank_, " aborted (exit code ", exit_code, ")"));
    }
    state_->changed.notify_all();
    collectives_->abort(exit_code);
    std::abort();  // not reached: every Communicator::abort ends the process or throws
  }

 private:
  // A collective queues behind this rank's stream: it starts once the stream is empty.
  void waitForStream(const char* what) {
    waitUntil(*state_, options().timeout,
              detail::concat("rank ", rank_, " ", what, ", behind its posted messages"),
              [this] { return state_->streams[rank_].empty(); });
  }

  std::shared_ptr<State> state_;
  int rank_;
  std::unique_ptr<Communicator> collectives_;  // a LocalGroup's: collectives, splits
};

}  // namespace

InOrderGroup::InOrderGroup(int size, CommOptions options)
    : state_(std::make_shared<State>(size, options)), collectives_(size, options) {
  PPSTAGE_CHECK(size >= 1, "an in-order group needs at least one rank; got ", size);
}

int64_t InOrderGroup::allReduces() const { return *state_->all_reduces; }

std::unique_ptr<Communicator> InOrderGroup::communicator(int rank) const {
  PPSTAGE_CHECK(rank >= 0 && rank < state_->size, "rank ", rank, " outside an in-order group of ",
                state_->size);
  return std::make_unique<InOrderCommunicator>(state_, rank, collectives_.communicator(rank));
}

}  // namespace ppstage
