// The non-virtual helpers of include/ppstage/comm/communicator.h.
#include "ppstage/comm/communicator.h"

namespace ppstage {

void Communicator::sendSync(const at::Tensor& tensor, int dst, MessageTag tag) {
  send(tensor, dst, tag)->wait(options_.timeout);
}

void Communicator::recvSync(const at::Tensor& tensor, int src, MessageTag tag) {
  recv(tensor, src, tag)->wait(options_.timeout);
}

}  // namespace ppstage
