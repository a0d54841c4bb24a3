// Communicator: how stages on different ranks exchange tensors.
//
// Contract, for every implementation (MPI, local threads, NCCL):
//   - send() and recv() post a point-to-point operation and return at once with a Work.
//     A message is matched by (peer, tag) only, so any number may be in flight between two
//     ranks in any posting order. (NCCL has no tags: it matches in posting order, so both
//     ranks must post a pair's messages in the same order, as a lowered schedule does.) The
//     sender's tensor must stay unmodified, and the receiver's tensor untouched, until the Work
//     completes; the Work keeps both alive. recv() writes into a tensor of the message's exact
//     dtype and element count (any strides); a mismatch is an error.
//   - allReduceSum(), broadcast(), barrier() and split() are collectives: every rank of the
//     communicator calls them, in the same order. They block, with the timeout.
//   - Every blocking wait has a timeout (CommOptions::timeout, --comm.timeout_s): a peer
//     that died or never sends makes the wait throw CommError naming the peer rank and
//     what was awaited, never hang.
//   - Methods may be called from any thread, one call at a time per communicator.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ppstage/comm/message_tag.h"

namespace ppstage {

// A communication failure: a timeout, a dead peer, an abort. Not the user's input.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The error every communicator raises when a wait outlasts its timeout: `what` says who
// waited for what ("rank 0 waiting to receive activation 0 of stage 1, ... from rank 1").
CommError timeoutError(std::chrono::milliseconds timeout, const std::string& what);

struct CommOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
};

// One posted send or receive.
class Work {
 public:
  virtual ~Work() = default;
  // Non-blocking: true once the operation finished (a failed one too).
  virtual bool isCompleted() = 0;
  // Blocks until the operation finished. Throws CommError when it failed, or when `timeout`
  // passed first; the message names the peer rank and the tag.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
};

// One operation of a batch of sends and receives (Communicator::batch).
struct P2pOp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  at::Tensor tensor;
  int peer = 0;
  MessageTag tag;
};

class Communicator {
 public:
  explicit Communicator(CommOptions options) : options_(options) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // True where messages match in posting order rather than by tag (NCCL): both ranks must
  // then post a pair's messages in one order, and a receive may not be posted ahead of
  // another communication (schedule/early_receives.h).
  virtual bool matchesInPostingOrder() const { return false; }
  const CommOptions& options() const { return options_; }

  virtual std::shared_ptr<Work> send(const at::Tensor& tensor, int dst, MessageTag tag) = 0;
  virtual std::shared_ptr<Work> recv(const at::Tensor& tensor, int src, MessageTag tag) = 0;
  // Posts several sends and receives together, one Work each, in order. NCCL posts them as
  // one group (ncclGroupStart/End), so a rank may send to and receive from the same peer
  // in one batch without deadlock; the default posts them one by one.
  virtual std::vector<std::shared_ptr<Work>> batch(const std::vector<P2pOp>& ops);

  // In place: every tensor becomes the sum over ranks of that tensor. Blocking.
  virtual void allReduceSum(const std::vector<at::Tensor>& tensors) = 0;
  // `bytes` of rank `root` replace every other rank's. Blocking.
  virtual void broadcast(std::string& bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ranks with equal `color` form a new communicator, ordered by `key`. Collective.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Ends every rank's participation: the MPI job, or (local) every waiting thread.
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // send/recv then wait with options().timeout.
  void sendSync(const at::Tensor& tensor, int dst, MessageTag tag);
  void recvSync(const at::Tensor& tensor, int src, MessageTag tag);

 private:
  CommOptions options_;
};

}  // namespace ppstage
