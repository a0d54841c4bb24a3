// MpiCommunicator: the default communicator, MPI point-to-point and collectives on CPU
// tensors of any dtype. See communicator.h for the contract and mpi_session.h for the
// thread level.
#pragma once

#include <memory>

#include "ppstage/comm/communicator.h"

namespace ppstage {

class MpiCommunicator final : public Communicator {
 public:
  // A private duplicate of MPI_COMM_WORLD. MPI must be active (MpiSession).
  static std::unique_ptr<MpiCommunicator> world(CommOptions options = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::shared_ptr<Work> send(const at::Tensor& tensor, int dst, MessageTag tag) override;
  std::shared_ptr<Work> recv(const at::Tensor& tensor, int src, MessageTag tag) override;
  void allReduceSum(const std::vector<at::Tensor>& tensors) override;
  void broadcast(std::string& bytes, int root) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  [[noreturn]] void abort(int exit_code) override;

  struct Handle;  // owns the MPI_Comm (RAII) and the mutex serializing MPI calls

 private:
  MpiCommunicator(std::shared_ptr<Handle> handle, CommOptions options);

  std::shared_ptr<Handle> handle_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace ppstage
