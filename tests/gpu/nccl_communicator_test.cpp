// NcclCommunicator on a GPU machine (built only with PPSTAGE_WITH_NCCL; skipped without a
// CUDA device). One process: a one-rank communicator, bootstrapped by a LocalGroup, sends to
// and receives from itself in one NCCL group. Under mpirun with one GPU per rank the ring
// test exchanges between ranks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "ppstage/comm/local_communicator.h"
#include "ppstage/comm/nccl_communicator.h"
#include "ppstage/core/software_stack.h"

namespace ppstage {
namespace {

std::unique_ptr<NcclCommunicator> selfCommunicator() {
  LocalGroup group(1);
  return NcclCommunicator::create(group.communicator(0), /*device=*/0,
                                  CommOptions{std::chrono::milliseconds(60000)});
}

class NcclTest : public testing::Test {
 protected:
  void SetUp() override {
    const SoftwareStack stack = softwareStack();
    if (stack.cuda_devices < 1) {
      GTEST_SKIP() << "no CUDA device visible: " << stack.no_device_reason;
    }
  }
};

TEST_F(NcclTest, SendToSelfInOneGroupIsBitwiseExact) {
  auto comm = selfCommunicator();
  const auto cuda = at::device(at::Device(at::kCUDA, 0));
  for (const at::Tensor& sent :
       {at::randn({64, 33}, cuda), at::randn({8, 8}, cuda).to(at::kBFloat16),
        at::randint(0, 1 << 30, {17}, cuda.dtype(at::kLong)), at::randn({6, 4}, cuda).t()}) {
    at::Tensor got = sent.dim() == 2 && !sent.is_contiguous() ? at::empty({6, 4}, cuda).t()
                                                              : at::empty_like(sent);
    auto works =
        comm->batch({P2pOp{P2pOp::Kind::kSend, sent, 0, {MessageKind::kActivation, 1, 0, 0}},
                     P2pOp{P2pOp::Kind::kRecv, got, 0, {MessageKind::kActivation, 1, 0, 0}}});
    for (auto& w : works) w->wait(std::chrono::milliseconds(60000));
    EXPECT_TRUE(at::equal(got.cpu(), sent.cpu()));
  }
}

TEST_F(NcclTest, AllReduceOfOneRankIsIdentity) {
  auto comm = selfCommunicator();
  at::Tensor a = at::arange(10, at::device(at::kCUDA).dtype(at::kFloat));
  at::Tensor b = at::full({3}, 2, at::device(at::kCUDA).dtype(at::kBFloat16));
  comm->allReduceSum({a, b});
  EXPECT_TRUE(at::equal(a.cpu(), at::arange(10, at::kFloat)));
  EXPECT_TRUE(at::equal(b.cpu(), at::full({3}, 2, at::kBFloat16)));
  comm->barrier();
}

}  // namespace
}  // namespace ppstage
