// PeerChannels: point-to-point messages over one sub-communicator per direction between
// two ranks, for communicators that match in posting order (NCCL; Note [NCCL's posting
// order] in comm/in_order_communicator.h).
//
// On one such communicator a rank's sends and receives queue on one stream, so a send to a
// peer that is itself sending waits for a receive queued behind the peer's send: 1F1B's
// 2-stage lists (rank 0: F1 SEND_F1 RECV_B0 B0; rank 1: B0 SEND_B0 RECV_F1 F1) hang there,
// and so do GPipe, interleaved and zb-v at two stages per rank even with every run of
// communication actions posted as one group. Here each route (sender -> receiver) is a
// two-rank communicator of its own, split from the parent, with a stream of its own:
// messages from a to b queue only behind messages from a to b. Within a route, the
// receiver must post its receives in the sender's order (schedule/send_order.h); then
// only the compute order can make ranks wait on each other, which the schedule's
// simulator checks.
//
// Collectives (allReduceSum, broadcast, barrier, split) and abort go to the parent.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "ppstage/comm/communicator.h"

namespace ppstage {

// (sender, receiver): ranks of one communicator.
using Route = std::pair<int, int>;

class PeerChannels final : public Communicator {
 public:
  // Collective over `parent`, which must outlive it: every rank passes the same `routes`.
  // The splits come in rounds of routes without a rank in common: two for a pipeline of 2
  // ranks, four for one of 4 without wrap-around, about six for a ring of 3 or 5.
  // A failed wait names its route in the parent's ranks.
  static std::unique_ptr<PeerChannels> create(Communicator& parent, std::vector<Route> routes);

  int rank() const override { return parent_.rank(); }
  int size() const override { return parent_.size(); }
  bool matchesInPostingOrder() const override { return parent_.matchesInPostingOrder(); }

  // Throws ppstage::Error (a bug) for a route not given to create().
  std::shared_ptr<Work> send(const at::Tensor& tensor, int dst, MessageTag tag) override;
  std::shared_ptr<Work> recv(const at::Tensor& tensor, int src, MessageTag tag) override;

  void allReduceSum(const std::vector<at::Tensor>& tensors) override;
  void broadcast(std::string& bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  [[noreturn]] void abort(int exit_code) override;

 private:
  explicit PeerChannels(Communicator& parent);
  Communicator& channel(const Route& route) const;

  Communicator& parent_;
  // This rank's routes; in each, the sender is rank 0 and the receiver rank 1.
  std::map<Route, std::unique_ptr<Communicator>> channels_;
};

}  // namespace ppstage
