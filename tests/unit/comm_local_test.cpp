// The communication layer without MPI: LocalGroup (ranks as threads), Topology, message
// tags, boundary descriptions, and agreed setup errors.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/boundary_spec.h"
#include "ppstage/comm/local_communicator.h"
#include "ppstage/comm/ring_all_reduce.h"
#include "ppstage/core/error.h"
#include "ppstage/core/topology.h"
#include "support/local_ranks.h"

namespace ppstage {
namespace {

using std::chrono::milliseconds;

using test::runRanks;

std::vector<at::Tensor> samples(int seed) {
  // A generator of its own: ranks that are threads must not share the global one.
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  return {at::randn({3, 5}, gen), at::randn({4, 6}, gen).to(at::kBFloat16),
          at::randint(-(int64_t{1} << 40), int64_t{1} << 40, {7}, gen, at::kLong),
          at::randn({6, 4}, gen).t(), at::tensor(42, at::kLong)};
}

TEST(LocalComm, RoundTripsAreBitwiseExact) {
  runRanks(2, [](int rank, Communicator& comm) {
    const int peer = 1 - rank;
    const auto mine = samples(rank);
    const auto theirs = samples(peer);
    std::vector<std::shared_ptr<Work>> works;
    for (size_t i = 0; i < mine.size(); ++i) {
      works.push_back(
          comm.send(mine[i], peer, {MessageKind::kActivation, 1, 0, static_cast<int>(i)}));
    }
    for (size_t i = 0; i < theirs.size(); ++i) {
      at::Tensor got = at::empty_like(theirs[i]);
      if (i == 3) got = at::empty({6, 4}).t();  // receive into a non-contiguous tensor too
      comm.recvSync(got, peer, {MessageKind::kActivation, 1, 0, static_cast<int>(i)});
      EXPECT_TRUE(at::equal(got, theirs[i])) << "tensor " << i;
    }
    for (auto& w : works) w->wait(milliseconds(1000));
  });
}

TEST(LocalComm, MessagesInFlightAreMatchedByTagWhateverTheOrder) {
  constexpr int kMessages = 64;
  runRanks(2, [](int rank, Communicator& comm) {
    if (rank == 0) {
      for (int mb = 0; mb < kMessages; ++mb) {
        comm.send(at::full({16}, mb, at::kFloat), 1, {MessageKind::kGradient, 2, mb, 0});
      }
      return;
    }
    std::vector<at::Tensor> got(kMessages);
    std::vector<std::shared_ptr<Work>> works(kMessages);
    for (int mb = kMessages - 1; mb >= 0; --mb) {  // posted in reverse
      got[mb] = at::empty({16});
      works[mb] = comm.recv(got[mb], 0, {MessageKind::kGradient, 2, mb, 0});
    }
    for (int k = 0; k < kMessages; ++k) {
      const int mb = (k * 37) % kMessages;  // waited in a scrambled order
      works[mb]->wait(milliseconds(5000));
      EXPECT_TRUE(at::equal(got[mb], at::full({16}, mb, at::kFloat))) << "micro-batch " << mb;
    }
  });
}

TEST(LocalComm, AllReduceSumsOverDataParallelGroups) {
  runRanks(4, [](int rank, Communicator& world) {
    const Topology topo = Topology::forJob(4, /*dp=*/2, /*stages=*/2, 1).atRank(rank);
    auto dp = world.split(topo.dataParallelColor(), topo.dpRank());
    EXPECT_EQ(dp->size(), 2);
    EXPECT_EQ(dp->rank(), topo.dpRank());
    at::Tensor grad = at::full({3}, rank + 1, at::kFloat);
    at::Tensor count = at::full({2}, 1, at::kLong);
    dp->allReduceSum({grad, count});
    // dp groups are {0, 2} and {1, 3}
    const float expected = topo.ppRank() == 0 ? 1 + 3 : 2 + 4;
    EXPECT_TRUE(at::equal(grad, at::full({3}, expected, at::kFloat)));
    EXPECT_TRUE(at::equal(count, at::full({2}, 2, at::kLong)));
  });
}

// The ring all-reduce (MpiCommunicator's for large buffers) over odd rank counts, element
// counts that leave chunks unequal or empty, and exact integer sums.
TEST(LocalComm, RingAllReduceSumsOverAnyRankCount) {
  for (const int ranks : {2, 3, 5}) {
    for (const int64_t elements : {int64_t{1}, int64_t{4}, int64_t{1001}}) {
      runRanks(ranks, [&](int rank, Communicator& comm) {
        const at::Tensor ramp = at::arange(elements, at::kLong);
        at::Tensor mine = ramp * 1000 + rank;
        ringAllReduceSum(comm, mine);
        const int64_t rank_sum = int64_t{ranks} * (ranks - 1) / 2;
        EXPECT_TRUE(at::equal(mine, ramp * 1000 * ranks + rank_sum))
            << ranks << " ranks, " << elements << " elements, rank " << rank;
      });
    }
  }
}

// Its halves alone: after the reduce-scatter each rank's owned chunk is the sum (bitwise
// the all-reduce's), the owned chunks tile the buffer, and the all-gather puts every
// rank's owned chunk into every buffer, whatever the rest held.
TEST(LocalComm, RingReduceScatterAndAllGatherAreTheAllReducesHalves) {
  for (const int ranks : {2, 3}) {
    for (const int64_t elements : {int64_t{2}, int64_t{1001}}) {
      std::vector<int64_t> offsets(static_cast<size_t>(ranks));
      runRanks(ranks, [&](int rank, Communicator& comm) {
        const at::Tensor ramp = at::arange(elements, at::kDouble) * 0.1;
        at::Tensor mine = ramp * (rank + 1);
        at::Tensor reduced = mine.clone();
        ringAllReduceSum(comm, reduced);
        ringReduceScatterSum(comm, mine);
        const at::Tensor owned = ringOwnedChunk(mine, rank, ranks);
        const int64_t offset = ringOwnedOffset(elements, rank, ranks);
        offsets[static_cast<size_t>(rank)] = offset;
        EXPECT_TRUE(at::equal(owned, reduced.narrow(0, offset, owned.numel())))
            << ranks << " ranks, rank " << rank;
        at::Tensor gathered = at::full({elements}, -1.0, at::kDouble);
        gathered.narrow(0, offset, owned.numel()).copy_(owned);
        ringAllGather(comm, gathered);
        EXPECT_TRUE(at::equal(gathered, reduced)) << ranks << " ranks, rank " << rank;
      });
      std::sort(offsets.begin(), offsets.end());
      EXPECT_EQ(offsets.front(), 0);
      EXPECT_EQ(std::set<int64_t>(offsets.begin(), offsets.end()).size(),
                static_cast<size_t>(ranks));
    }
  }
}

TEST(LocalComm, BroadcastAndBarrier) {
  runRanks(3, [](int rank, Communicator& comm) {
    std::string bytes = rank == 1 ? std::string("plan\0bytes", 10) : "";
    comm.broadcast(bytes, 1);
    EXPECT_EQ(bytes, std::string("plan\0bytes", 10));
    comm.barrier();
  });
}

TEST(LocalComm, AWaitForADeadPeerTimesOutNamingIt) {
  try {
    runRanks(
        2,
        [](int rank, Communicator& comm) {
          if (rank == 1) return;  // never sends
          at::Tensor t = at::empty({2});
          comm.recvSync(t, 1, {MessageKind::kActivation, 2, 3, 0});
        },
        milliseconds(200));
    FAIL() << "expected a CommError";
  } catch (const CommError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("timed out"), std::string::npos) << what;
    EXPECT_NE(what.find("from rank 1"), std::string::npos) << what;
    EXPECT_NE(what.find("stage 2, micro-batch 3"), std::string::npos) << what;
  }
}

TEST(LocalComm, AbortWakesEveryWaitingRank) {
  EXPECT_THROW(runRanks(3,
                        [](int rank, Communicator& comm) {
                          if (rank == 0) comm.abort(3);
                          comm.barrier();
                        }),
               CommError);
}

BoundarySpec spec(int stage, int64_t width) {
  BoundarySpec s;
  s.stage = stage;
  s.tensors.push_back({"layers.0/x", at::kFloat, {{1, 0}, {0, 16}, {0, width}}, true});
  s.tensors.push_back({"sizes", at::kLong, {{0, 2}}, false});
  return s;
}

TEST(BoundarySpec, SerializesLosslessly) {
  BoundarySpec s = spec(3, 64);
  s.tensors.push_back({"flat", at::kBFloat16, {{16, 0}, {0, 96}}, true});
  EXPECT_EQ(BoundarySpec::deserialize(s.serialize()), s);
  EXPECT_EQ(s.tensors[2].sizes(4), (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(s.tensors[0].describe(), "layers.0/x [b, 16, 64] Float grad");
  const auto buffers = allocateReceiveBuffers(s, 2);
  EXPECT_EQ(buffers[0].sizes(), (std::vector<int64_t>{2, 16, 64}));
  EXPECT_EQ(buffers[1].scalar_type(), at::kLong);
  EXPECT_THROW(BoundarySpec::deserialize("something else"), Error);
}

TEST(BoundarySpec, MismatchIsReportedOnBothRanksWithBothDescriptions) {
  std::vector<std::string> errors(2);
  LocalGroup group(2, CommOptions{milliseconds(5000)});
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group.communicator(r);
      try {
        exchangeBoundarySpec(*comm, 1 - r, spec(1, r == 0 ? 64 : 32), /*sender_side=*/r == 0);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("stage 0 (rank 0) and stage 1 (rank 1) does not match"), std::string::npos)
        << error;
    EXPECT_NE(error.find("[b, 16, 64]"), std::string::npos) << error;
    EXPECT_NE(error.find("[b, 16, 32]"), std::string::npos) << error;
  }
  EXPECT_EQ(errors[0], errors[1]);
}

// Both ranks come out of the exchange, without an error, and the link is left clean: the
// next message on it is the next one sent, not a leftover of the exchange.
TEST(BoundarySpec, MatchingSpecsPass) {
  std::vector<double> received(2, -1);
  EXPECT_NO_THROW(runRanks(2, [&](int rank, Communicator& comm) {
    exchangeBoundarySpec(comm, 1 - rank, spec(1, 64), rank == 0);
    const at::Tensor mine = at::full({1}, 10.0 + rank, at::kDouble);
    const at::Tensor theirs = at::zeros({1}, at::kDouble);
    const MessageTag tag = controlTag(ControlChannel::kBenchmark);
    auto sent = comm.send(mine, 1 - rank, tag);
    comm.recvSync(theirs, 1 - rank, tag);
    sent->wait(std::chrono::milliseconds(5000));
    received[static_cast<size_t>(rank)] = theirs.item<double>();
  }));
  EXPECT_EQ(received, (std::vector<double>{11.0, 10.0}));
}

TEST(Topology, LaysOutReplicasAndStages) {
  const Topology t = Topology::forJob(8, /*dp=*/2, /*stages=*/8, 1).atRank(6);
  EXPECT_EQ(t.ppRank(), 2);
  EXPECT_EQ(t.dpRank(), 1);
  EXPECT_EQ(t.myStages(), (std::vector<int>{2, 6}));
  EXPECT_EQ(t.ownerOfStage(3), 7);
  EXPECT_EQ(t.prevRank(2), 5);
  EXPECT_EQ(t.nextRank(7), -1);
  EXPECT_EQ(t.prevRank(0), -1);
  const Topology v = Topology::forJob(2, 1, 4, 1, Placement::kV).atRank(0);
  EXPECT_EQ(v.myStages(), (std::vector<int>{0, 3}));
  EXPECT_EQ(v.nextRank(0), 1);
  EXPECT_EQ(v.nextRank(2), 0);
}

TEST(Topology, RejectsImpossibleLayouts) {
  EXPECT_THROW(Topology::forJob(3, 2, 2, 1), Error);  // world != pp * dp
  EXPECT_THROW(Topology::forJob(2, 1, 3, 1), Error);  // stages not divisible
  EXPECT_THROW(Topology::forJob(2, 1, 6, 1, Placement::kV), Error);
}

TEST(MessageTag, EncodesEveryFieldDistinctly) {
  const MessageTag tag{MessageKind::kGradient, 5, 1000, 3};
  EXPECT_EQ(MessageTag::decode(tag.encode()).describe(), tag.describe());
  EXPECT_NE(tag.encode(), (MessageTag{MessageKind::kActivation, 5, 1000, 3}.encode()));
  EXPECT_THROW((MessageTag{MessageKind::kGradient, 200, 0, 0}.encode()), Error);
}

// A control message says what it is for: a timeout in a collective names it.
TEST(MessageTag, DescribesAControlMessageByItsChannel) {
  EXPECT_EQ(controlTag(ControlChannel::kAllReduce).describe(),
            "a control message (an all-reduce's chunk)");
  EXPECT_EQ((MessageTag{MessageKind::kActivation, 1, 4, 0}.describe()),
            "activation 0 of stage 1, micro-batch 4");
}

TEST(Agreement, OneRanksSetupErrorEndsEveryRankWithItsMessage) {
  std::vector<std::string> messages(3);
  std::vector<int> codes(3), reporters(3);
  runRanks(3, [&](int rank, Communicator& comm) {
    try {
      runAgreed(comm, [&] {
        if (rank == 1) throw Error("cannot read the data file");
      });
    } catch (const JobError& e) {
      messages[static_cast<size_t>(rank)] = e.what();
      codes[static_cast<size_t>(rank)] = e.exitCode();
      reporters[static_cast<size_t>(rank)] = e.reportsHere();
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(messages[static_cast<size_t>(r)], "[rank 1] cannot read the data file");
    EXPECT_EQ(codes[static_cast<size_t>(r)], 2);
  }
  EXPECT_EQ(reporters, (std::vector<int>{1, 0, 0}));
  // No failure: nothing thrown.
  runRanks(2, [](int, Communicator& comm) { runAgreed(comm, [] {}); });
}

}  // namespace
}  // namespace ppstage
