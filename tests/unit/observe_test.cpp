// observe/ without a run: the metrics' compile time and memory growth, open file
// descriptors, and the loss comparison behind compare-runs and compare-compile.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "ppstage/core/error.h"
#include "ppstage/observe/live_metrics.h"
#include "ppstage/observe/loss_comparison.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/observe/tensorboard_events.h"
#include "support/error_of.h"

namespace ppstage {
namespace {

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

TEST(LiveMetrics, AStepLineHoldsWhatTheStepLineSaysAndNullForANanLoss) {
  LiveStep s{3, std::nan(""), std::nan(""), 0.001, 2.5, 0.5, 1000, true, 0.25, std::nan(""), false};
  const nlohmann::json line = nlohmann::json::parse(liveStepJson(s, 12.5));
  EXPECT_EQ(line.at("kind"), "step");
  EXPECT_EQ(line.at("step"), 3);
  EXPECT_TRUE(line.at("loss").is_null());
  EXPECT_EQ(line.at("tokens_per_s"), 1000);
  EXPECT_FALSE(line.contains("accuracy")) << "not a classifier";
  EXPECT_FALSE(line.contains("epoch")) << "endless data";
  EXPECT_EQ(line.at("finite"), false);
  s.token_rate = false;
  s.accuracy = 0.5;
  const nlohmann::json samples = nlohmann::json::parse(liveStepJson(s, 12.5));
  EXPECT_EQ(samples.at("samples_per_s"), 1000);
  EXPECT_EQ(samples.at("accuracy"), 0.5);
  const nlohmann::json eval = nlohmann::json::parse(liveEvalJson({10, 2.0, 0.75, 0.1}, 1));
  EXPECT_EQ(eval.at("kind"), "eval");
  EXPECT_EQ(eval.at("accuracy"), 0.75);
}

TEST(TensorBoardEvents, WrittenScalarsReadBackAndADamagedRecordIsNamed) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "ppstage_tensorboard_test").string();
  std::filesystem::remove_all(dir);
  std::string path;
  {
    TensorBoardWriter writer(dir);
    writer.write(1, {{"train/loss", 5.5}, {"train/lr", 0.003}});
    writer.write(2, {{"train/loss", 4.25}});
    path = writer.path();
    // Flushed as written: readable while the writer is open.
    EXPECT_EQ(readTensorBoardScalars(path).size(), 3u);
  }
  EXPECT_NE(path.find("events.out.tfevents."), std::string::npos);
  const std::vector<TensorBoardScalar> read = readTensorBoardScalars(path);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[0].tag, "train/loss");
  EXPECT_EQ(read[0].step, 1);
  EXPECT_FLOAT_EQ(read[0].value, 5.5f);
  EXPECT_FLOAT_EQ(read[1].value, 0.003f);
  EXPECT_EQ(read[2].step, 2);
  EXPECT_FLOAT_EQ(read[2].value, 4.25f);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-6, std::ios::end);  // inside the last event's message
    file.put('\x7f');
  }
  EXPECT_NE(test::errorOf([&] { readTensorBoardScalars(path); }).find("record 2"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ppstage
