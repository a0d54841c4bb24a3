// See include/ppstage/comm/local_communicator.h.
//
// One mutex and condition variable per group guard the mailboxes and the collective round.
// A collective is a generation barrier: each rank deposits its contribution; the last to
// arrive combines them, publishes the result and starts the next generation.
#include "ppstage/comm/local_communicator.h"

#include <ATen/ATen.h>

#include <any>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>

#include "ppstage/core/error.h"

namespace ppstage {

struct LocalGroup::State {
  State(int size, CommOptions options) : size(size), options(options), contributions(size) {}

  const int size;
  const CommOptions options;
  std::mutex mutex;
  std::condition_variable changed;
  // (source, destination, encoded tag) -> messages in sending order
  std::map<std::tuple<int, int, int>, std::deque<at::Tensor>> mailboxes;
  uint64_t generation = 0;
  int arrived = 0;
  std::vector<std::any> contributions;
  std::any result;
  bool aborted = false;
  std::string abort_reason;
};

namespace {

using Clock = std::chrono::steady_clock;
using Lock = std::unique_lock<std::mutex>;
using State = LocalGroup::State;

// Waits on `state.changed` until `ready()`; throws CommError on timeout or abort.
void waitFor(State& state, Lock& lock, std::chrono::milliseconds timeout,
             const std::function<bool()>& ready, const std::string& what) {
  const auto deadline = Clock::now() + timeout;
  while (!ready()) {
    if (state.aborted) throw CommError(what + ": " + state.abort_reason);
    if (state.changed.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
      if (state.aborted) throw CommError(what + ": " + state.abort_reason);
      throw timeoutError(timeout, what);
    }
  }
}

class DoneWork final : public Work {
 public:
  bool isCompleted() override { return true; }
  void wait(std::chrono::milliseconds) override {}
};

class LocalRecvWork final : public Work {
 public:
  LocalRecvWork(std::shared_ptr<State> state, at::Tensor destination, std::tuple<int, int, int> key,
                std::string what)
      : state_(std::move(state)),
        destination_(std::move(destination)),
        key_(key),
        what_(std::move(what)) {}

  bool isCompleted() override {
    if (done_) return true;
    Lock lock(state_->mutex);
    return tryTake();
  }

  void wait(std::chrono::milliseconds timeout) override {
    if (done_) return;
    Lock lock(state_->mutex);
    waitFor(
        *state_, lock, timeout, [&] { return tryTake(); }, what_);
  }

 private:
  // With the lock held: takes the first matching message, if any.
  bool tryTake() {
    auto box = state_->mailboxes.find(key_);
    if (box == state_->mailboxes.end() || box->second.empty()) return false;
    at::Tensor message = std::move(box->second.front());
    box->second.pop_front();
    done_ = true;
    if (message.scalar_type() != destination_.scalar_type() ||
        message.numel() != destination_.numel()) {
      throw CommError(detail::concat(what_, ": got ", message.numel(), " ",
                                     c10::toString(message.scalar_type()), " elements, expected ",
                                     destination_.numel(), " ",
                                     c10::toString(destination_.scalar_type())));
    }
    destination_.copy_(message.view(destination_.sizes()));
    return true;
  }

  std::shared_ptr<State> state_;
  at::Tensor destination_;
  std::tuple<int, int, int> key_;
  std::string what_;
  bool done_ = false;
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<State> state, int rank)
      : Communicator(state->options), state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size; }

  std::shared_ptr<Work> send(const at::Tensor& tensor, int dst, MessageTag tag) override {
    checkPeer(dst);
    at::Tensor copy = tensor.detach().clone(at::MemoryFormat::Contiguous);
    {
      Lock lock(state_->mutex);
      state_->mailboxes[{rank_, dst, tag.encode()}].push_back(std::move(copy));
    }
    state_->changed.notify_all();
    return std::make_shared<DoneWork>();
  }

  std::shared_ptr<Work> recv(const at::Tensor& tensor, int src, MessageTag tag) override {
    checkPeer(src);
    return std::make_shared<LocalRecvWork>(
        state_, tensor, std::make_tuple(src, rank_, tag.encode()),
        detail::concat("rank ", rank_, " waiting to receive ", tag.describe(), " from rank ", src));
  }

  void allReduceSum(const std::vector<at::Tensor>& tensors) override {
    const auto sums = collective<std::vector<at::Tensor>>(
        tensors, "in an all-reduce", [](const std::vector<std::any>& all) {
          std::vector<at::Tensor> sum;
          for (const std::any& contribution : all) {
            const auto& ts = std::any_cast<const std::vector<at::Tensor>&>(contribution);
            if (sum.empty()) {
              for (const at::Tensor& t : ts) sum.push_back(t.detach().clone());
            } else {
              for (size_t i = 0; i < ts.size(); ++i) sum[i].add_(ts[i]);
            }
          }
          return sum;
        });
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(sums[i]);
  }

  void broadcast(std::string& bytes, int root) override {
    checkPeer(root);
    bytes = collective<std::string>(
        bytes, "in a broadcast",
        [root](const std::vector<std::any>& all) { return std::any_cast<std::string>(all[root]); });
  }

  void barrier() override {
    collective<int>(0, "in a barrier", [](const std::vector<std::any>&) { return 0; });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    using Groups = std::vector<std::pair<std::shared_ptr<State>, int>>;  // per rank
    const int size = state_->size;
    const CommOptions options = this->options();
    const Groups groups = collective<Groups>(
        std::make_pair(color, key), "in a split",
        [size, options](const std::vector<std::any>& all) {
          std::map<int, std::vector<std::pair<int, int>>> members;  // color -> (key, rank)
          for (int r = 0; r < size; ++r) {
            const auto [c, k] = std::any_cast<std::pair<int, int>>(all[r]);
            members[c].emplace_back(k, r);
          }
          Groups out(size);
          for (auto& [c, list] : members) {
            std::sort(list.begin(), list.end());
            auto state = std::make_shared<State>(static_cast<int>(list.size()), options);
            for (size_t i = 0; i < list.size(); ++i)
              out[list[i].second] = {state, static_cast<int>(i)};
          }
          return out;
        });
    return std::make_unique<LocalCommunicator>(groups[rank_].first, groups[rank_].second);
  }

  void abort(int exit_code) override {
    {
      Lock lock(state_->mutex);
      state_->aborted = true;
      state_->abort_reason = detail::concat("rank ", rank_, " aborted (exit code ", exit_code, ")");
    }
    state_->changed.notify_all();
    throw CommError(state_->abort_reason);
  }

 private:
  void checkPeer(int peer) const {
    PPSTAGE_INTERNAL_ASSERT(peer >= 0 && peer < state_->size, "rank ", peer, " outside a group of ",
                            state_->size);
  }

  template <typename Result, typename Contribution>
  Result collective(Contribution contribution, const char* what,
                    const std::function<Result(const std::vector<std::any>&)>& combine) {
    Lock lock(state_->mutex);
    const uint64_t generation = state_->generation;
    state_->contributions[rank_] = std::move(contribution);
    if (++state_->arrived == state_->size) {
      state_->result = combine(state_->contributions);
      state_->arrived = 0;
      ++state_->generation;
      state_->changed.notify_all();
    } else {
      waitFor(
          *state_, lock, options().timeout, [&] { return state_->generation != generation; },
          detail::concat("rank ", rank_, " ", what, " of ", state_->size, " ranks"));
    }
    return std::any_cast<Result>(state_->result);
  }

  std::shared_ptr<State> state_;
  int rank_;
};

}  // namespace

LocalGroup::LocalGroup(int size, CommOptions options)
    : state_(std::make_shared<State>(size, options)) {
  PPSTAGE_CHECK(size >= 1, "a local group needs at least one rank; got ", size);
}

std::unique_ptr<Communicator> LocalGroup::communicator(int rank) const {
  PPSTAGE_CHECK(rank >= 0 && rank < state_->size, "rank ", rank, " outside a local group of ",
                state_->size);
  return std::make_unique<LocalCommunicator>(state_, rank);
}

}  // namespace ppstage
