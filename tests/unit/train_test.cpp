// The training box without MPI: data sets and sample order, the loss, clipping, the
// metrics' compile time and memory growth, agreed setup errors, and whole training runs
// with ranks as threads (LocalGroup) against the single-process run.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "ppstage/comm/agreement.h"
#include "ppstage/comm/local_communicator.h"
#include "ppstage/core/compute_threads.h"
#include "ppstage/core/error.h"
#include "ppstage/data/dataset.h"
#include "ppstage/data/embedded_text.h"
#include "ppstage/observe/loss_comparison.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/schedule/early_receives.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/train/gradient_sync.h"
#include "ppstage/train/step_policy.h"
#include "ppstage/train/stop_signal.h"
#include "ppstage/train/trainer.h"
#include "support/error_of.h"
#include "support/local_ranks.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

using test::runRanks;

DataRequest tokenRequest(int64_t seq_len, int64_t vocab) {
  DataRequest r;
  r.input = {at::kLong, {seq_len}, vocab};
  r.output = {at::kFloat, {seq_len, vocab}, 0};
  r.loss = LossKind::kCrossEntropy;
  return r;
}

TEST(Data, TextWindowsAreInputsAndNextByteTargets) {
  const std::string path = testing::TempDir() + "ppstage_text.txt";
  std::ofstream(path) << "abcdefghij";  // 10 bytes: (10 - 1) / 4 = 2 windows of 4
  DataConfig config;
  config.path = path;
  const auto data = openDataset(config, tokenRequest(4, 256));
  EXPECT_EQ(data->size(), 2);
  EXPECT_TRUE(at::equal(data->sample(0, 1), at::tensor({'e', 'f', 'g', 'h'}, at::kLong)));
  EXPECT_TRUE(at::equal(data->sample(1, 1), at::tensor({'f', 'g', 'h', 'i'}, at::kLong)));
  std::remove(path.c_str());
}

TEST(Data, EmbeddedTextIsTheDefault) {
  const auto data = openDataset(DataConfig{}, tokenRequest(64, 256));
  EXPECT_GT(embeddedText().size(), 200000u);
  EXPECT_EQ(data->size(), static_cast<int64_t>((embeddedText().size() - 1) / 64));
  EXPECT_NE(data->describe().find("Jargon File"), std::string::npos);
  EXPECT_EQ(data->sample(0, 0)[0].item<int64_t>(), 'W');  // "Welcome to the Jargon File"
}

TEST(Data, BadDataIsRejectedWithTheReason) {
  DataConfig missing;
  missing.path = "/nonexistent/ppstage.txt";
  EXPECT_NE(test::errorOf([&] {
              openDataset(missing, tokenRequest(8, 256));
            }).find("cannot read the data file"),
            std::string::npos);
  EXPECT_NE(test::errorOf([&] {
              openDataset(DataConfig{}, tokenRequest(8, 96));
            }).find("the model's output has 96 classes"),
            std::string::npos);
  DataRequest mse = tokenRequest(8, 256);
  mse.loss = LossKind::kMse;
  EXPECT_NE(test::errorOf([&] { openDataset(DataConfig{}, mse); }).find("cross_entropy"),
            std::string::npos);
}

TEST(Data, SyntheticSamplesDependOnTheIndexAndSeedOnly) {
  DataConfig synthetic;
  synthetic.path = "synthetic";
  const auto a = openDataset(synthetic, tokenRequest(16, 50));
  const auto b = openDataset(synthetic, tokenRequest(16, 50));
  EXPECT_TRUE(at::equal(a->sample(0, 7), b->sample(0, 7)));
  EXPECT_FALSE(at::equal(a->sample(0, 7), a->sample(0, 8)));
  // Targets are the inputs shifted by one.
  EXPECT_TRUE(at::equal(a->sample(0, 3).narrow(0, 1, 15), a->sample(1, 3).narrow(0, 0, 15)));
  EXPECT_LT(a->sample(0, 3).max().item<int64_t>(), 50);
}

TEST(Data, EveryEpochVisitsEverySampleOnceInTheSameOrderOnEveryRank) {
  const SampleOrder order(10, 3), again(10, 3), other(10, 4);
  std::vector<int64_t> seen;
  for (int step = 0; step < 5; ++step) {
    const auto batch = order.batch(step, 4);  // 20 samples: two epochs
    EXPECT_EQ(batch, again.batch(step, 4));
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int64_t> unique(seen.begin() + epoch * 10, seen.begin() + epoch * 10 + 10);
    EXPECT_EQ(unique.size(), 10u);
  }
  EXPECT_NE(order.batch(0, 10), other.batch(0, 10));
}

TEST(Loss, CrossEntropyFlattensLogitsOfEitherLayout) {
  const at::Tensor logits = at::randn({2, 3, 5});
  const at::Tensor targets = at::randint(5, {2, 3}, at::kLong);
  const at::Tensor expected = at::cross_entropy_loss(logits.reshape({6, 5}), targets.reshape({6}));
  EXPECT_TRUE(at::allclose(computeLoss(LossKind::kCrossEntropy, logits, targets), expected));
  EXPECT_TRUE(at::allclose(computeLoss(LossKind::kCrossEntropy, logits.reshape({6, 5}), targets),
                           expected));
  EXPECT_NE(test::errorOf([&] {
              computeLoss(LossKind::kCrossEntropy, logits, at::zeros({2, 4}, at::kLong));
            }).find("rows of logits"),
            std::string::npos);
  EXPECT_EQ(resolveLossKind(std::nullopt, at::kLong), LossKind::kCrossEntropy);
  EXPECT_EQ(resolveLossKind(std::nullopt, at::kFloat), LossKind::kMse);
}

TEST(Clipping, CoefficientIsClipGradNormsOne) {
  EXPECT_DOUBLE_EQ(clipCoefficient(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clipCoefficient(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clipCoefficient(100.0, 0.0), 1.0);  // 0: clipping off
}

TEST(Metrics, CompileTimeIsTheWarmUpStepsOverAsManySteadySteps) {
  // Profiling on step 1, forward optimized on step 2, backward on step 3.
  ASSERT_EQ(kWarmupSteps, 3u);
  EXPECT_NEAR(warmupOverhead({0.3, 0.8, 2.0, 0.1, 0.12, 0.1, 0.09}), 0.2 + 0.7 + 1.9, 1e-12);
  EXPECT_NEAR(warmupOverhead({0.5, 0.3, 0.2}), 0.3 + 0.1, 1e-12);  // one steady step left
  EXPECT_EQ(warmupOverhead({0.05, 0.1, 0.1, 0.1, 0.1}), 0.0);      // never below 0
  EXPECT_EQ(warmupOverhead({0.5}), 0.0);
  // Growth after the warm-up: compiling's memory in the first 3 steps is not a leak, a
  // straight line of 0.5 MB per step after it is 50 MB per 100 steps; after the first 10%
  // when that is longer.
  EXPECT_NEAR(growthPer100Steps({100, 180, 260, 300, 300, 300, 300}), 0.0, 1e-9);
  std::vector<double> rss;
  for (int i = 0; i < 50; ++i) rss.push_back(200 + (i < 5 ? 30.0 : 0.5 * i));
  EXPECT_NEAR(growthPer100Steps(rss), 50.0, 1e-9);
}

TEST(Metrics, OpenFileDescriptorsCountAFileWhileItIsOpen) {
  const int before = openFileDescriptors();
  ASSERT_GT(before, 2);  // at least stdin, stdout and stderr
  FILE* file = std::fopen("/proc/self/status", "r");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(openFileDescriptors(), before + 1);
  std::fclose(file);
  EXPECT_EQ(openFileDescriptors(), before);
}

TEST(ComputeThreads, DenormalsAreFlushedToZero) {
  const auto product = [](float a, float b) {
    return (at::full({1}, a) * at::full({1}, b)).item<float>();
  };
  at::globalContext().setFlushDenormal(false);
  ASSERT_GT(product(1e-30f, 1e-10f), 0.0f);  // 1e-40: a denormal
  ASSERT_TRUE(flushDenormals());
  EXPECT_EQ(product(1e-30f, 1e-10f), 0.0f);             // a denormal result is 0
  EXPECT_EQ(product(1e-40f, 1e10f), 0.0f);              // and so is a denormal operand
  EXPECT_EQ(product(1e-20f, 1e-10f), 1e-20f * 1e-10f);  // normal numbers are not touched
  at::globalContext().setFlushDenormal(false);
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

// Whole runs with ranks as threads: every rank's metrics, rank 0's losses against one
// process. (Under mpirun, with final parameters: tests/integration/train_numerics.sh.)
RunMetrics trainMetrics(const Config& config, int ranks) {
  RunMetrics out;
  runRanks(ranks, [&](int rank, Communicator& comm) {
    std::ostringstream log;
    const RunMetrics metrics = train(config, comm, log);
    if (rank == 0) out = metrics;
  });
  return out;
}

std::vector<double> trainLosses(const Config& config, int ranks) {
  return trainMetrics(config, ranks).losses;
}

Config smallRun() {
  Config config = test::builtinConfig("gpt", 4, /*tie_embeddings=*/true);
  config.train.steps = 4;
  config.train.batch_size = 8;
  config.train.threads = 1;
  config.train.optimizer = OptimizerKind::kSgd;
  config.train.lr = 0.1;
  config.train.grad_clip = 0.5;
  config.data.path = "synthetic";
  config.output.log_every = 0;
  return config;
}

TEST(TrainInProcess, ZeroBubbleAndDataParallelRunsMatchOneProcess) {
  Config reference = smallRun();
  reference.pipeline.stages = 1;
  reference.pipeline.microbatches = 1;
  const std::vector<double> expected = trainLosses(reference, 1);
  ASSERT_EQ(expected.size(), 4u);
  EXPECT_LT(expected.back(), expected.front());

  Config zero_bubble = smallRun();
  zero_bubble.pipeline.schedule = "zb-h1";
  zero_bubble.pipeline.microbatches = 4;
  Config data_parallel = smallRun();
  data_parallel.train.dp = 2;
  data_parallel.pipeline.microbatches = 2;
  Config interleaved = smallRun();
  interleaved.pipeline.schedule = "interleaved-1f1b";
  interleaved.pipeline.stages = 4;
  interleaved.pipeline.microbatches = 4;
  for (const auto& [name, config, ranks] :
       {std::tuple{"zb-h1 on 2 ranks", zero_bubble, 2},
        std::tuple{"1f1b pp 2 x dp 2", data_parallel, 4},
        std::tuple{"interleaved, 4 stages on 2 ranks", interleaved, 2}}) {
    const std::vector<double> losses = trainLosses(config, ranks);
    ASSERT_EQ(losses.size(), expected.size()) << name;
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], expected[i], 1e-5 * std::abs(expected[i])) << name << " step " << i;
    }
  }
}

// The executor's receive buffers (runtime/executor.h): 1F1B on 2 ranks keeps one
// micro-batch in flight per stage, so each rank's one pool holds 2 buffers (one posted
// ahead), allocated before the first step and never again over 4 steps of 4 micro-batches.
// U-Net on 4 ranks: a skip connection's value passes through stages 1 and 2, whose sends
// hold it to the end of the step; those buffers come back then, and no rank allocates
// beyond its pools. The prediction has every stage's own costs (4 stages on 2 ranks) and
// a message time.
TEST(TrainInProcess, ReceiveBuffersAreAllocatedOnceAndTheStepPredictedPerStage) {
  Config config = smallRun();
  config.pipeline.microbatches = 4;
  const RunMetrics four = trainMetrics(config, 2);
  ASSERT_EQ(four.ranks.size(), 2u);
  for (size_t r = 0; r < 2; ++r) EXPECT_EQ(four.ranks[r].receive_buffers, 2) << "rank " << r;
  EXPECT_GT(four.comm_s, 0);
  // Rank 0 waits for the gradient of micro-batch 0 while rank 1 runs its F and B.
  EXPECT_GT(four.ranks[0].wait_s[ActionKind::kRecvBackward], 0);

  Config unet;
  unet.model.name = test::fixturePath("unet.pt");
  unet.model.input_dtype = InputDtype::kFloat32;
  unet.model.input_shape = {8, 4, 32};
  unet.train.batch_size = 8;
  unet.pipeline.stages = 4;
  unet.pipeline.microbatches = 4;
  unet.train.steps = 3;
  unet.train.threads = 1;
  unet.data.path = "synthetic";
  unet.output.log_every = 0;
  const RunMetrics skip = trainMetrics(unet, 4);
  const PipelineSchedule schedule =
      buildSchedule(makeScheduleRegistry(), scheduleOptionsFor(unet.pipeline, 4, 1));
  for (size_t r = 0; r < 4; ++r) {
    int64_t pools = 0;
    for (const auto& [pool, held] : receiveBuffersHeld(postReceivesEarly(schedule.ranks[r], {}))) {
      pools += held;
    }
    EXPECT_EQ(skip.ranks[r].receive_buffers, pools) << "U-Net rank " << r;
  }

  Config interleaved = smallRun();
  interleaved.pipeline.schedule = "interleaved-1f1b";
  interleaved.pipeline.stages = 4;
  interleaved.pipeline.microbatches = 4;
  const RunMetrics m = trainMetrics(interleaved, 2);
  ASSERT_EQ(m.stage_action_s.size(), 4u);
  for (size_t s = 0; s < 4; ++s) {
    EXPECT_GT(m.stage_action_s[s][ActionKind::kForward], 0) << "F of stage " << s;
    EXPECT_GT(m.stage_action_s[s][ActionKind::kBackward], 0) << "B of stage " << s;
  }
  // The last stage carries the head and the loss: its own forward is not its rank's mean.
  EXPECT_NE(m.stage_action_s[3][ActionKind::kForward], m.stage_action_s[1][ActionKind::kForward]);
}

// --train.max_skipped counts skipped steps in a row: a run that skips every other step goes
// on however long it runs; only max_skipped skips with no finite step between stop it.
TEST(StepPolicy, AFiniteStepEndsTheRowOfSkippedSteps) {
  SkippedSteps skipped(3);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(skipped.skip()) << "skip " << i + 1 << " of every other step";
    skipped.finite();
  }
  EXPECT_EQ(skipped.total(), 50);
  EXPECT_TRUE(skipped.skip());
  EXPECT_TRUE(skipped.skip());
  EXPECT_FALSE(skipped.skip());
  EXPECT_EQ(skipped.inARow(), 3);
}

// The first step logged is the run's first, also when it resumes at step 245 (so 246 in
// the log), not the first multiple of --output.log_every.
TEST(StepPolicy, AResumedRunLogsItsFirstStep) {
  OutputConfig output;
  output.log_every = 50;
  EXPECT_TRUE(logsStep(output, 245, 245, 300));
  EXPECT_FALSE(logsStep(output, 246, 245, 300));
  EXPECT_TRUE(logsStep(output, 249, 245, 300));
  EXPECT_TRUE(logsStep(output, 299, 245, 300));
  EXPECT_TRUE(logsStep(output, 0, 0, 300));
  output.log_every = 0;
  EXPECT_FALSE(logsStep(output, 245, 245, 300));
}

// One loss comparison for compare-runs and compare-compile: a loss that went NaN in one run
// only is an infinite difference (std::max with NaN used to report 0 and pass), NaN in both
// (a step both skipped) is equal, and steps line up by global step.
TEST(LossComparison, ANanInOneRunOnlyIsAnInfiniteDifference) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const LossDifference went_nan = compareLosses({2.0, 1.5, 1.2}, 0, {2.0, nan, 1.2}, 0);
  EXPECT_TRUE(std::isinf(went_nan.max_rel_diff));
  EXPECT_EQ(went_nan.worst_step, 1);
  EXPECT_FALSE(went_nan.max_rel_diff <= 1e-5);
  EXPECT_TRUE(std::isinf(compareLosses({nan, 1.0}, 0, {3.0, 1.0}, 0).max_rel_diff));
  EXPECT_EQ(compareLosses({2.0, nan, 1.2}, 0, {2.0, nan, 1.2}, 0).max_rel_diff, 0.0);
  // A run resumed at step 2 is compared on steps 2 and 3 only.
  const LossDifference resumed = compareLosses({4.0, 3.0, 2.0, 1.0}, 0, {2.0, 1.1}, 2);
  EXPECT_EQ(resumed.steps, 2u);
  EXPECT_EQ(resumed.worst_step, 3);
  EXPECT_NEAR(resumed.max_rel_diff, 0.1, 1e-12);
  EXPECT_THROW(compareLosses({1.0}, 0, {1.0}, 5), Error);
}

// Ctrl-C reaches every rank and mpirun passes it on as SIGTERM: when any rank saw SIGINT
// the job was stopped by SIGINT, whatever the others saw first (the largest signal number
// used to win, so Ctrl-C was reported as SIGTERM).
TEST(StopSignal, AnySigintMakesTheJobsStopASigint) {
  EXPECT_EQ(jobStopSignal({SIGTERM, SIGINT}), SIGINT);
  EXPECT_EQ(jobStopSignal({SIGINT, SIGTERM, 0}), SIGINT);
  EXPECT_EQ(jobStopSignal({0, SIGTERM}), SIGTERM);
  EXPECT_EQ(jobStopSignal({0, 0}), 0);
  EXPECT_STREQ(signalName(jobStopSignal({SIGTERM, SIGINT})), "SIGINT");
}

// A figure per kind is indexed by the kind itself, in its own index space: compute kinds
// and transfer kinds do not mix, and the kinds come in ActionKind order with their names.
TEST(PerKind, IndexesByKindWithinItsSpace) {
  PerCompute<double> costs{1, 2, 3, 4};
  EXPECT_EQ(costs[ActionKind::kBackwardInput], 3);
  costs[ActionKind::kBackwardWeight] += 1;
  EXPECT_EQ(costs[ActionKind::kBackwardWeight], 5);
  std::vector<std::string> names;
  for (const ActionKind kind : PerTransfer<double>::kinds()) names.push_back(kindName(kind));
  EXPECT_EQ(names, (std::vector<std::string>{"SEND_F", "RECV_F", "SEND_B", "RECV_B"}));
  PerTransfer<double> waits;
  waits[ActionKind::kRecvBackward] = 0.5;
  EXPECT_EQ(*(waits.end() - 1), 0.5);
  EXPECT_THROW(waits[ActionKind::kForward], InternalError);
}

}  // namespace
}  // namespace ppstage
