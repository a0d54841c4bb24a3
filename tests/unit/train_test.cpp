// The training box without MPI: clipping, the step policy, stop signals, and whole training
// runs with ranks as threads (LocalGroup) against the single-process run.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <sstream>

#include "ppstage/comm/local_communicator.h"
#include "ppstage/core/error.h"
#include "ppstage/observe/metrics.h"
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

TEST(Clipping, CoefficientIsClipGradNormsOne) {
  EXPECT_DOUBLE_EQ(clipCoefficient(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clipCoefficient(0.5, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clipCoefficient(100.0, 0.0), 1.0);  // 0: clipping off
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

}  // namespace
}  // namespace ppstage
