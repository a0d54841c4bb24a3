// NcclCommunicator: CUDA tensors between GPUs with NCCL. Compiled only when CMake finds a
// CUDA LibTorch and NCCL (PPSTAGE_WITH_NCCL); CPU builds never see it.
//
// MPI bootstraps it: rank 0 of the bootstrap communicator creates the NCCL unique id and
// broadcasts it. Sends, receives and all-reduces run on a dedicated CUDA stream, ordered
// after the work already queued on the caller's current stream by an event; the Work's
// wait() blocks the host until the operation finished (polling its event and NCCL's
// asynchronous error, with the timeout: a dead peer or a failed link aborts the NCCL
// communicator and throws CommError). The communicator is non-blocking, so init and split
// are bounded by the timeout too. batch() posts one NCCL group. NCCL matches point-to-point
// messages in posting order, not by tag. split() is ncclCommSplit.
#pragma once

#include <memory>

#include "ppstage/comm/communicator.h"

namespace ppstage {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`, whose ranks become this communicator's ranks; this rank
  // uses CUDA device `device`. Keeps `bootstrap` for broadcasts and splits.
  static std::unique_ptr<NcclCommunicator> create(std::unique_ptr<Communicator> bootstrap,
                                                  int device, CommOptions options = {});
  ~NcclCommunicator() override;

  int rank() const override;
  int size() const override;
  bool matchesInPostingOrder() const override { return true; }
  std::shared_ptr<Work> send(const at::Tensor& tensor, int dst, MessageTag tag) override;
  std::shared_ptr<Work> recv(const at::Tensor& tensor, int src, MessageTag tag) override;
  std::vector<std::shared_ptr<Work>> batch(const std::vector<P2pOp>& ops) override;
  void allReduceSum(const std::vector<at::Tensor>& tensors) override;
  void broadcast(std::string& bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  [[noreturn]] void abort(int exit_code) override;

  struct Impl;  // the ncclComm_t (RAII), the communication stream, the bootstrap

 private:
  NcclCommunicator(std::shared_ptr<Impl> impl, CommOptions options);
  std::shared_ptr<Impl> impl_;
};

}  // namespace ppstage
