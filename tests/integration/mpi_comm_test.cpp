// MpiCommunicator under mpirun with 2 and 4 ranks (tests/CMakeLists.txt runs both).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ppstage/comm/boundary_spec.h"
#include "ppstage/comm/mpi_communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/core/topology.h"

namespace ppstage {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<MpiCommunicator> world() {
  return MpiCommunicator::world(CommOptions{milliseconds(30000)});
}

// Deterministic tensors that depend on `seed` only: any rank can compute another's.
std::vector<at::Tensor> samples(int seed) {
  // A generator of its own: ranks that are threads must not share the global one.
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  return {at::randn({3, 5}, gen), at::randn({4, 6}, gen).to(at::kBFloat16),
          at::randint(-(int64_t{1} << 40), int64_t{1} << 40, {7}, gen, at::kLong),
          at::randn({6, 4}, gen).t(), at::empty({0})};
}

TEST(MpiComm, RoundTripsAroundARingAreBitwiseExact) {
  auto comm = world();
  const int next = (comm->rank() + 1) % comm->size();
  const int prev = (comm->rank() + comm->size() - 1) % comm->size();
  const auto mine = samples(comm->rank());
  const auto theirs = samples(prev);
  std::vector<std::shared_ptr<Work>> sends;
  for (size_t i = 0; i < mine.size(); ++i) {
    sends.push_back(
        comm->send(mine[i], next, {MessageKind::kActivation, 1, 2, static_cast<int>(i)}));
  }
  for (size_t i = 0; i < theirs.size(); ++i) {
    at::Tensor got = i == 3 ? at::empty({6, 4}).t() : at::empty_like(theirs[i]);
    comm->recvSync(got, prev, {MessageKind::kActivation, 1, 2, static_cast<int>(i)});
    EXPECT_TRUE(at::equal(got, theirs[i])) << "tensor " << i << " from rank " << prev;
  }
  for (auto& w : sends) w->wait(milliseconds(30000));
}

TEST(MpiComm, ManyMessagesInFlightArriveMatchedByTag) {
  constexpr int kMessages = 100;
  auto comm = world();
  const int peer = comm->rank() ^ 1;  // pairs (0,1), (2,3)
  if (peer >= comm->size()) return;
  std::vector<std::shared_ptr<Work>> sends, recvs(kMessages);
  std::vector<at::Tensor> got(kMessages);
  for (int mb = kMessages - 1; mb >= 0; --mb) {  // receives posted in reverse
    got[mb] = at::empty({1000});
    recvs[mb] = comm->recv(got[mb], peer, {MessageKind::kGradient, 3, mb, 1});
  }
  for (int mb = 0; mb < kMessages; ++mb) {
    sends.push_back(comm->send(at::full({1000}, 1000 * comm->rank() + mb, at::kFloat), peer,
                               {MessageKind::kGradient, 3, mb, 1}));
  }
  for (int k = 0; k < kMessages; ++k) {
    const int mb = (k * 37) % kMessages;
    recvs[mb]->wait(milliseconds(30000));
    EXPECT_TRUE(at::equal(got[mb], at::full({1000}, 1000 * peer + mb, at::kFloat))) << mb;
  }
  for (auto& w : sends) w->wait(milliseconds(30000));
}

TEST(MpiComm, AllReduceSumsOverDataParallelGroups) {
  auto comm = world();
  const int pp = comm->size() >= 4 ? 2 : 1;
  const int dp = comm->size() / pp;
  const Topology topo = Topology::forJob(comm->size(), dp, pp, 1).atRank(comm->rank());
  auto dp_group = comm->split(topo.dataParallelColor(), topo.dpRank());
  ASSERT_EQ(dp_group->size(), dp);
  // 1.2 MB: around the ring of the group's own ranks.
  at::Tensor grad = at::full({300'000}, comm->rank() + 1, at::kFloat);
  at::Tensor half = at::full({3}, 0.5, at::kBFloat16);
  dp_group->allReduceSum({grad, half});
  float expected = 0;
  for (int d = 0; d < dp; ++d) expected += topo.worldRank(topo.ppRank(), d) + 1;
  EXPECT_TRUE(at::equal(grad, at::full({300'000}, expected, at::kFloat)));
  EXPECT_TRUE(at::equal(half, at::full({3}, 0.5 * dp, at::kBFloat16)));
}

// Large buffers around the ring (ringAllReduceSum): element counts that do not divide by
// the ranks, a half-precision tensor reduced in float32, and integers that
// must sum exactly. Each rank's values depend on its rank only, so the sum is known.
TEST(MpiComm, LargeAllReduceAroundTheRingSumsExactly) {
  auto comm = world();
  const int n = comm->size();
  constexpr int64_t kElements = (1 << 18) + 3;  // a 1 MiB float buffer, not a multiple of n
  const at::Tensor ramp = at::arange(kElements, at::kLong);
  at::Tensor floats = ((ramp % 1000) * (comm->rank() + 1)).to(at::kFloat).view({-1, 1});
  at::Tensor longs = ramp * (int64_t{1} << 20) + comm->rank();
  at::Tensor halves = at::full({kElements}, 0.25 * (comm->rank() + 1), at::kBFloat16);
  comm->allReduceSum({floats, longs, halves});
  const int64_t rank_sum = int64_t{n} * (n + 1) / 2;  // sum of rank + 1
  EXPECT_TRUE(at::equal(floats, ((ramp % 1000) * rank_sum).to(at::kFloat).view({-1, 1})));
  EXPECT_TRUE(at::equal(longs, ramp * (int64_t{1} << 20) * n + (rank_sum - n)));
  EXPECT_TRUE(at::equal(halves, at::full({kElements}, 0.25 * rank_sum, at::kBFloat16)));
}

// Tensors larger than a bucket (16 MiB): a contiguous one is cut into views across buckets,
// a transposed one summed whole; each must come back summed in place.
TEST(MpiComm, TensorsLargerThanABucketAreSummedInPlace) {
  auto comm = world();
  const int n = comm->size();
  const at::Tensor ramp = at::arange(5'000'000, at::kFloat).remainder(997);
  at::Tensor large = ramp * (comm->rank() + 1);                             // 20 MB
  at::Tensor transposed = at::full({2100, 2100}, comm->rank() + 1.0f).t();  // 17.6 MB
  at::Tensor small = at::full({10}, 1.0f);
  comm->allReduceSum({small, large, transposed});
  const float rank_sum = n * (n + 1) / 2.0f;
  EXPECT_TRUE(at::equal(large, ramp * rank_sum));
  EXPECT_TRUE(at::equal(transposed, at::full({2100, 2100}, rank_sum)));
  EXPECT_TRUE(at::equal(small, at::full({10}, static_cast<float>(n))));
}

// Summing floats in ring order must still give every rank the same bits.
TEST(MpiComm, LargeAllReduceGivesEveryRankTheSameBits) {
  auto comm = world();
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(comm->rank() + 7));
  at::Tensor grad = at::randn({300001}, gen);
  comm->allReduceSum({grad});
  at::Tensor first = grad.clone();
  std::string bytes(static_cast<const char*>(first.data_ptr()), first.nbytes());
  comm->broadcast(bytes, 0);
  EXPECT_EQ(std::memcmp(bytes.data(), grad.data_ptr(), bytes.size()), 0);
}

TEST(MpiComm, BroadcastAndBarrier) {
  auto comm = world();
  std::string bytes = comm->rank() == 0 ? "hello from rank 0" : "";
  comm->broadcast(bytes, 0);
  EXPECT_EQ(bytes, "hello from rank 0");
  comm->barrier();
}

TEST(MpiComm, BoundaryMismatchFailsOnBothRanksNamingBoth) {
  auto comm = world();
  const int peer = comm->rank() ^ 1;
  if (peer >= comm->size()) return;
  const bool sender = comm->rank() % 2 == 0;
  BoundarySpec mine;
  mine.stage = 1;
  mine.tensors.push_back({"x", at::kFloat, {{1, 0}, {0, sender ? 64 : 32}}, true});
  try {
    exchangeBoundarySpec(*comm, peer, mine, sender);
    FAIL() << "expected a mismatch";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not match"), std::string::npos) << what;
    EXPECT_NE(what.find("x [b, 64] Float grad"), std::string::npos) << what;
    EXPECT_NE(what.find("x [b, 32] Float grad"), std::string::npos) << what;
    EXPECT_NE(what.find("(rank " + std::to_string(comm->rank()) + ")"), std::string::npos);
  }
}

}  // namespace
}  // namespace ppstage
