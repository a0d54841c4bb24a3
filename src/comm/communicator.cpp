// The non-virtual helpers of include/ppstage/comm/communicator.h.
#include "ppstage/comm/communicator.h"

#include "ppstage/core/error.h"

namespace ppstage {

CommError timeoutError(std::chrono::milliseconds timeout, const std::string& what) {
  return CommError(detail::concat("timed out after ", static_cast<double>(timeout.count()) / 1000.0,
                                  " s: ", what, "; is that rank alive? (--comm.timeout_s sets ",
                                  "the limit)"));
}

std::vector<std::shared_ptr<Work>> Communicator::batch(const std::vector<P2pOp>& ops) {
  std::vector<std::shared_ptr<Work>> works;
  for (const P2pOp& op : ops) {
    works.push_back(op.kind == P2pOp::Kind::kSend ? send(op.tensor, op.peer, op.tag)
                                                  : recv(op.tensor, op.peer, op.tag));
  }
  return works;
}

void Communicator::sendSync(const at::Tensor& tensor, int dst, MessageTag tag) {
  send(tensor, dst, tag)->wait(options_.timeout);
}

void Communicator::recvSync(const at::Tensor& tensor, int src, MessageTag tag) {
  recv(tensor, src, tag)->wait(options_.timeout);
}

}  // namespace ppstage
