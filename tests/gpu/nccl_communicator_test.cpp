// NcclCommunicator on a GPU machine (built only with PPSTAGE_WITH_NCCL; skipped without a
// CUDA device). One process: a one-rank communicator, bootstrapped by a LocalGroup, sends to
// and receives from itself in one NCCL group (a non-contiguous send too: the race of packing
// after the ready event), all-reduces, splits (ncclCommSplit), and fails on a receive that
// no send meets, which aborts it (Note [Non-blocking NCCL]).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "ppstage/comm/local_communicator.h"
#include "ppstage/comm/nccl_communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/core/software_stack.h"

namespace ppstage {
namespace {

std::unique_ptr<NcclCommunicator> selfCommunicator(
    std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
  LocalGroup group(1);
  return NcclCommunicator::create(group.communicator(0), /*device=*/0, CommOptions{timeout});
}

const MessageTag kTag{MessageKind::kActivation, 1, 0, 0};

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
    auto works = comm->batch(
        {P2pOp{P2pOp::Kind::kSend, sent, 0, kTag}, P2pOp{P2pOp::Kind::kRecv, got, 0, kTag}});
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

TEST_F(NcclTest, ASplitIsACommunicatorOfItsOwn) {
  auto comm = selfCommunicator();
  std::unique_ptr<Communicator> part = comm->split(/*color=*/0, /*key=*/0);
  ASSERT_EQ(part->size(), 1);
  EXPECT_TRUE(part->matchesInPostingOrder());
  at::Tensor a = at::arange(5, at::device(at::kCUDA).dtype(at::kFloat));
  part->allReduceSum({a});
  EXPECT_TRUE(at::equal(a.cpu(), at::arange(5, at::kFloat)));
  at::Tensor got = at::empty_like(a);
  auto works =
      part->batch({P2pOp{P2pOp::Kind::kSend, a, 0, kTag}, P2pOp{P2pOp::Kind::kRecv, got, 0, kTag}});
  for (auto& w : works) w->wait(std::chrono::milliseconds(60000));
  EXPECT_TRUE(at::equal(got.cpu(), a.cpu()));
  comm->barrier();  // the parent still works
}

// Last in this file: the abort leaves the device to the tests after it. A receive that no
// send meets either fails when its group ends (NCCL refuses a receive from its own rank
// without a send in the group) or times out; both abort the communicator.
TEST_F(NcclTest, AReceiveThatNoSendMeetsFailsAndAbortsTheCommunicator) {
  auto comm = selfCommunicator(std::chrono::milliseconds(2000));
  at::Tensor got = at::empty({4}, at::device(at::kCUDA));
  try {
    comm->recv(got, 0, kTag)->wait(std::chrono::milliseconds(2000));
    ADD_FAILURE() << "a receive that no send meets finished";
  } catch (const CommError& e) {
    const std::string message = e.what();
    EXPECT_TRUE(message.find("waiting to receive") != std::string::npos ||
                message.find("posting a group") != std::string::npos)
        << message;
  }
  EXPECT_THROW(comm->allReduceSum({got}), Error);  // aborted: no further operation
}

}  // namespace
}  // namespace ppstage
