// The executor's posting order under NCCL's matching (Note [NCCL's posting order]), proved
// on the CPU with InOrderGroup: what it models; the 1F1B hang of a pipeline's messages on
// one communicator; every built-in schedule at 2-4 ranks, 1-2 stages per rank and 1-8
// micro-batches free of hangs and mismatches with a channel per direction
// (comm/peer_channels.h) and receives in their sender's order (schedule/send_order.h);
// whole training runs of every built-in schedule with the pipeline's messages on it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "ppstage/comm/in_order_communicator.h"
#include "ppstage/comm/peer_channels.h"
#include "ppstage/core/error.h"
#include "ppstage/core/topology.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/schedule/early_receives.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/schedule/send_order.h"
#include "ppstage/train/trainer.h"
#include "support/local_ranks.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

using test::runRanksInOrder;
using namespace std::chrono_literals;

const MessageTag kFirst{MessageKind::kActivation, 1, 0, 0};
const MessageTag kSecond{MessageKind::kGradient, 1, 0, 0};

P2pOp opOf(P2pOp::Kind kind, const at::Tensor& t, int peer, MessageTag tag) {
  return P2pOp{kind, t, peer, tag};
}

// The message of the CommError `f` throws, or "(no error)".
std::string commErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  return "(no error)";
}

void waitAll(const std::vector<std::shared_ptr<Work>>& works, const Communicator& comm) {
  for (const auto& work : works) work->wait(comm.options().timeout);
}

TEST(InOrderGroup, CrossedSendsPostedAloneHangAndNameBothStreamHeads) {
  const std::string error = commErrorOf([] {
    runRanksInOrder(
        2,
        [](int rank, Communicator& comm) {
          const int peer = 1 - rank;
          at::Tensor got = at::empty({3});
          std::vector<std::shared_ptr<Work>> works;
          works.push_back(comm.send(at::ones({3}), peer, rank == 0 ? kFirst : kSecond));
          works.push_back(comm.recv(got, peer, rank == 0 ? kSecond : kFirst));
          waitAll(works, comm);
        },
        300ms);
  });
  EXPECT_NE(error.find("timed out after 0.3 s"), std::string::npos) << error;
  EXPECT_NE(error.find("stream heads: rank 0 sending activation 0 of stage 1, micro-batch 0 "
                       "to rank 1; rank 1 sending gradient 0 of stage 1"),
            std::string::npos)
      << error;
}

TEST(InOrderGroup, CrossedSendsInOneGroupProgressTogether) {
  runRanksInOrder(2, [](int rank, Communicator& comm) {
    const int peer = 1 - rank;
    at::Tensor got = at::zeros({2, 3});
    const at::Tensor sent = at::arange(6, at::kFloat).view({3, 2}).t() + rank;  // strided
    waitAll(comm.batch({opOf(P2pOp::Kind::kSend, sent, peer, rank == 0 ? kFirst : kSecond),
                        opOf(P2pOp::Kind::kRecv, got, peer, rank == 0 ? kSecond : kFirst)}),
            comm);
    EXPECT_TRUE(at::equal(got, at::arange(6, at::kFloat).view({3, 2}).t() + peer));
  });
}

TEST(InOrderGroup, MessagesMatchInPostingOrderNotByTag) {
  const std::string error = commErrorOf([] {
    runRanksInOrder(2, [](int rank, Communicator& comm) {
      std::vector<std::shared_ptr<Work>> works;
      if (rank == 0) {
        works = comm.batch({opOf(P2pOp::Kind::kSend, at::ones({4}), 1, kFirst),
                            opOf(P2pOp::Kind::kSend, at::ones({4}), 1, kSecond)});
      } else {
        works = comm.batch({opOf(P2pOp::Kind::kRecv, at::empty({4}), 0, kSecond),
                            opOf(P2pOp::Kind::kRecv, at::empty({4}), 0, kFirst)});
      }
      waitAll(works, comm);
    });
  });
  EXPECT_NE(error.find("posting orders differ: send 1 from rank 0 to rank 1 is activation 0 of "
                       "stage 1, micro-batch 0 (4 Float), the receive it meets expects gradient"),
            std::string::npos)
      << error;
}

TEST(InOrderGroup, ACollectiveWaitsBehindTheRanksPostedMessages) {
  runRanksInOrder(2, [](int rank, Communicator& comm) {
    at::Tensor got = at::zeros({1});
    std::shared_ptr<Work> work =
        rank == 0 ? comm.send(at::full({1}, 7.0), 1, kFirst) : comm.recv(got, 0, kFirst);
    at::Tensor sum = at::ones({1});
    comm.allReduceSum({sum});  // rank 0's send must complete first
    EXPECT_TRUE(work->isCompleted());
    EXPECT_EQ(sum.item<float>(), 2.0f);
    if (rank == 1) EXPECT_EQ(got.item<float>(), 7.0f);
  });
}

// A channel's failed wait names its route in the parent's ranks (its own are 0 and 1).
TEST(PeerChannels, AWaitThatTimesOutNamesItsRouteInTheParentsRanks) {
  const std::string error = commErrorOf([] {
    runRanksInOrder(
        3,
        [](int rank, Communicator& world) {
          const auto channels = PeerChannels::create(world, {{2, 0}, {0, 1}, {1, 2}});
          if (rank == 0) {
            at::Tensor got = at::zeros({2});
            channels->recv(got, 2, kFirst)->wait(world.options().timeout);  // never sent
          }
        },
        300ms);
  });
  EXPECT_NE(error.find("rank 1 receiving activation 0 of stage 1, micro-batch 0 from rank 0"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("[on the channel from rank 2 (its rank 0) to rank 0 (its rank 1)]"),
            std::string::npos)
      << error;
}

// One rank's list as the executor runs it (runtime/executor.h): a SEND or RECV posts its
// message where it stands, a compute action waits for what it needs (F its activations, B
// and I its gradients), the sends are waited for at the end. Every message carries a value
// naming its (stage, micro-batch), checked on arrival.
void postLikeTheExecutor(const ActionList& list, const Topology& pipeline, Communicator& comm) {
  struct Received {
    std::shared_ptr<Work> work;
    at::Tensor buffer;
    float expected = 0;
  };
  std::map<Action, Received> received;  // by its RECV
  std::vector<std::shared_ptr<Work>> sends;
  const auto valueOf = [](MessageKind kind, int s, int m) {
    return static_cast<float>((kind == MessageKind::kActivation ? 1 : -1) * (1000 * s + m + 1));
  };
  for (const Action& a : list) {
    const int s = a.stage, m = a.microbatch;
    const bool forward = a.kind == ActionKind::kSendForward || a.kind == ActionKind::kRecvForward;
    const MessageKind kind = forward ? MessageKind::kActivation : MessageKind::kGradient;
    const int boundary = forward || a.kind == ActionKind::kSendBackward ? s : s + 1;
    if (a.kind == ActionKind::kSendForward || a.kind == ActionKind::kSendBackward) {
      const int to = forward ? s + 1 : s - 1;
      const int at_boundary = forward ? s + 1 : s;
      sends.push_back(comm.send(at::full({5}, valueOf(kind, at_boundary, m)),
                                pipeline.ppRankOfStage(to), {kind, at_boundary, m, 0}));
    } else if (a.isReceive()) {
      const int from = forward ? s - 1 : s + 1;
      at::Tensor buffer = at::zeros({5});
      received[a] = {comm.recv(buffer, pipeline.ppRankOfStage(from), {kind, boundary, m, 0}),
                     buffer, valueOf(kind, boundary, m)};
    } else {
      const ActionKind needs =
          a.kind == ActionKind::kForward ? ActionKind::kRecvForward : ActionKind::kRecvBackward;
      const auto it =
          a.kind == ActionKind::kBackwardWeight ? received.end() : received.find({needs, s, m});
      if (it == received.end()) continue;
      it->second.work->wait(comm.options().timeout);
      PPSTAGE_CHECK(at::equal(it->second.buffer, at::full({5}, it->second.expected)), toString(a),
                    " on rank ", comm.rank(), " got the wrong message");
      received.erase(it);
    }
  }
  waitAll(sends, comm);
}

// `fixed`: over a channel per route, receives in their sender's order; false: the lowered
// lists on the one communicator, as ppstage would have posted them on NCCL before both.
void runPosting(const PipelineSchedule& schedule, const Topology& pipeline, bool fixed,
                std::chrono::milliseconds timeout) {
  const std::vector<ActionList> lists =
      fixed ? receiveInSendOrder(schedule.request, schedule.ranks) : schedule.ranks;
  runRanksInOrder(
      pipeline.ppSize(),
      [&](int rank, Communicator& world) {
        const ActionList list = postReceivesEarly(lists[rank], {1, true});
        if (!fixed) return postLikeTheExecutor(list, pipeline, world);
        const auto channels =
            PeerChannels::create(world, sendRoutes(schedule.request, schedule.ranks));
        postLikeTheExecutor(list, pipeline, *channels);
      },
      timeout);
}

// Today's hang, as the audit read it (../shared/GPU-AUDIT.md §2): 2-stage 1F1B posts
// rank 0: F1 SEND_F1 RECV_B0 B0 and rank 1: B0 SEND_B0 RECV_F1 F1.
TEST(InOrderPosting, OneFOneBPostedOneByOneHangs) {
  ScheduleOptions options;
  options.stages = 2;
  options.microbatches = 4;
  const PipelineSchedule schedule = buildSchedule(makeScheduleRegistry(), options);
  const Topology pipeline = Topology::forPipeline(2, 1);
  const std::string error = commErrorOf([&] { runPosting(schedule, pipeline, false, 300ms); });
  EXPECT_NE(error.find("stream heads: rank 0 sending activation 0 of stage 1, micro-batch 1 to "
                       "rank 1; rank 1 sending gradient 0 of stage 1, micro-batch 0 to rank 0"),
            std::string::npos)
      << error;
  runPosting(schedule, pipeline, true, 20s);
}

TEST(InOrderPosting, EveryBuiltInScheduleIsFreeOfThePostingHang) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  for (const std::string& name : registry.names()) {
    int layouts = 0;
    for (int ranks = 2; ranks <= 4; ++ranks) {
      for (int per_rank = 1; per_rank <= 2; ++per_rank) {
        for (int microbatches : {1, 2, 3, 4, 6, 8}) {
          PipelineConfig config;
          config.schedule = name;
          config.stages = ranks * per_rank;
          config.stages_per_rank = per_rank;
          config.microbatches = microbatches;
          defaultScheduleLayout(registry, config, {"pipeline.stages_per_rank"});
          ScheduleOptions options = scheduleOptionsFor(config, config.stages, per_rank);
          PipelineSchedule schedule;
          try {
            schedule = buildSchedule(registry, options);
          } catch (const Error&) {
            continue;  // a layout this schedule does not take
          }
          const Topology pipeline =
              Topology::forPipeline(config.stages, per_rank, config.placement);
          SCOPED_TRACE(name + " on " + std::to_string(ranks) + " ranks, " +
                       std::to_string(per_rank) + " stages per rank, " +
                       std::to_string(microbatches) + " micro-batches");
          EXPECT_NO_THROW(runPosting(schedule, pipeline, true, 5s));
          ++layouts;
        }
      }
    }
    EXPECT_GE(layouts, 6) << name;
  }
}

// The executor itself: whole runs of every built-in schedule, training and evaluating, with
// the pipeline's messages on an InOrderGroup (control on a LocalGroup, as MPI would carry
// it beside NCCL), against the same runs with everything on the LocalGroup: bitwise.
// `*all_reduces`, if given: the all-reduces the data communicator ran (InOrderGroup's).
RunMetrics trainOn(const Config& config, bool data_in_order, int ranks = 2,
                   int64_t* all_reduces = nullptr) {
  LocalGroup control(ranks, CommOptions{20s});
  InOrderGroup data(ranks, CommOptions{20s});
  RunMetrics metrics;
  test::runRanksOf(control, ranks, [&](int rank, Communicator& world) {
    const std::unique_ptr<Communicator> pipeline = data.communicator(rank);
    std::ostringstream log;
    RunMetrics mine = data_in_order ? train(config, JobCommunicators{world, *pipeline}, log)
                                    : train(config, world, log);
    if (rank == 0) metrics = std::move(mine);
  });
  if (all_reduces != nullptr) *all_reduces = data.allReduces();
  return metrics;
}

TEST(InOrderPosting, EveryBuiltInScheduleTrainsWithItsMessagesInOrder) {
  const ScheduleRegistry registry = makeScheduleRegistry();
  for (const std::string& name : registry.names()) {
    Config config = test::builtinConfig("gpt", 4, /*tie_embeddings=*/true);
    config.train.steps = 2;
    config.train.threads = 1;
    config.data.path = "";          // the embedded text, for training and evaluation
    config.model.vocab_size = 256;  // byte tokens
    config.output.log_every = 0;
    config.eval.every = 2;
    config.eval.batches = 1;
    config.pipeline.schedule = name;
    config.pipeline.microbatches = 4;
    config.pipeline.stages = name == "interleaved-1f1b" || name == "zb-v" ? 4 : 2;
    config.pipeline.stages_per_rank = config.pipeline.stages / 2;
    defaultScheduleLayout(registry, config.pipeline, {"pipeline.stages_per_rank"});
    SCOPED_TRACE(name);
    const RunMetrics expected = trainOn(config, false);
    ASSERT_EQ(expected.losses.size(), 2u);
    ASSERT_EQ(expected.eval.size(), 1u);
    const RunMetrics got = trainOn(config, true);
    EXPECT_EQ(got.losses, expected.losses);
    ASSERT_EQ(got.eval.size(), 1u);
    EXPECT_EQ(got.eval[0].loss, expected.eval[0].loss);
  }
}

// Where the data communicator matches in posting order (NCCL), the gradient sums (dp and
// tied weights) and the tensor-parallel all-reduces go on groups split from it too
// (JobCommunicators::collectives): at pp 2 x dp 2 and pp 2 x tp 2 on the mock, bitwise
// as on MPI's stand-in.
TEST(InOrderPosting, GradientSumsAndTensorParallelCollectivesOnTheDataCommunicator) {
  for (const bool tensor_parallel : {false, true}) {
    Config config = test::builtinConfig("gpt", 4, /*tie_embeddings=*/true);
    config.train.steps = 2;
    config.train.threads = 1;
    config.data.path = "synthetic";
    config.output.log_every = 0;
    config.pipeline.stages = 2;
    config.pipeline.microbatches = 2;
    (tensor_parallel ? config.train.tp : config.train.dp) = 2;
    SCOPED_TRACE(tensor_parallel ? "pp 2 x tp 2" : "pp 2 x dp 2");
    const RunMetrics expected = trainOn(config, false, 4);
    ASSERT_EQ(expected.losses.size(), 2u);
    int64_t all_reduces = 0;
    EXPECT_EQ(trainOn(config, true, 4, &all_reduces).losses, expected.losses);
    // Every rank, every step: the tied embedding's sum, and the dp sum, or with tp the TP
    // all-reduces of its 2 blocks per micro-batch (attention and MLP outputs forward, their
    // inputs' gradients backward). All of them on the data communicator, none on control.
    const int64_t per_step = 1 + (tensor_parallel ? 2 * 2 * 4 : 1);
    EXPECT_EQ(all_reduces, 4 * 2 * per_step);
  }
}

}  // namespace
}  // namespace ppstage
