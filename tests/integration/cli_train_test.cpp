// `ppstage train` as a user runs it under mpirun: the metrics it reports, the loss falling
// on the embedded text, and bad input ending every rank with one clear line.
// (Numerics against the single-process run: train_numerics.sh, through compare-runs.)
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli_runner.h"

namespace ppstage {
namespace {

std::string mpirun(int np) { return std::string(PPSTAGE_MPIEXEC) + " -np " + std::to_string(np); }

std::string config(const std::string& name) {
  return std::string(" --config ") + PPSTAGE_SOURCE_DIR + "/configs/" + name;
}

nlohmann::json readJson(const std::string& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

std::string fixture(const std::string& name) {
  return std::string(PPSTAGE_SOURCE_DIR) + "/tests/fixtures/" + name;
}

double mean(const std::vector<double>& v, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += v[i];
  return sum / static_cast<double>(end - begin);
}

// 50 steps of gpt-tiny, 1F1B over 2 ranks, on the embedded text with no data options.
TEST(TrainCli, LossFallsOnTheEmbeddedTextAndMetricsAreComplete) {
  const std::string metrics = testing::TempDir() + "ppstage_train_metrics.json";
  const Result r = runPpstage("train" + config("gpt-tiny.ini") +
                                  " --train.steps 50 --output.log_every 10 --train.threads 1"
                                  " --output.metrics_json " +
                                  metrics,
                              mpirun(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Rank 0 printed the configuration, the plan and the step lines (the epoch: 400 of the
  // embedded text's 4841 samples); nobody else did.
  EXPECT_NE(r.out.find("ppstage train: 2 ranks = pp 2 x dp 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Jargon File"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage  modules"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step   50/50  epoch 0.08  loss"), std::string::npos) << r.out;

  const nlohmann::json json = readJson(metrics);
  const auto losses = json.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 50u);
  const double first = mean(losses, 0, 10), last = mean(losses, 40, 50);
  std::cout << "gpt-tiny on the embedded text: mean loss of steps 1-10 " << first
            << ", of steps 41-50 " << last << "\n";
  // ln(256) = 5.5 at the start; byte frequencies alone get below 3.5.
  EXPECT_LT(last, first - 0.5);
  EXPECT_DOUBLE_EQ(json.at("final_loss").get<double>(), losses.back());
  EXPECT_EQ(json.at("step_time_s").size(), 50u);
  EXPECT_GT(json.at("tokens_per_s").get<double>(), 0);
  EXPECT_GT(json.at("measured_step_s").get<double>(), 0);
  EXPECT_GT(json.at("predicted_makespan_s").get<double>(), 0);
  EXPECT_GT(json.at("predicted_step_s").get<double>(),
            json.at("predicted_makespan_s").get<double>());
  ASSERT_EQ(json.at("ranks").size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json& entry = json.at("ranks").at(rank);
    EXPECT_EQ(entry.at("rank").get<int>(), rank);
    EXPECT_EQ(entry.at("stages").get<std::vector<int>>(), std::vector<int>{rank});
    EXPECT_GT(entry.at("busy_s").get<double>(), 0);
    EXPECT_GE(entry.at("idle_s").get<double>(), 0);
    EXPECT_GT(entry.at("peak_rss_mb").get<double>(), 0);
    EXPECT_GT(entry.at("action_costs_s").at("F").get<double>(), 0);
    EXPECT_GT(entry.at("action_costs_s").at("B").get<double>(), 0);
    EXPECT_EQ(entry.at("action_costs_s").at("W").get<double>(), 0);  // 1F1B runs no W
    EXPECT_GT(entry.at("tail_s").get<double>(), 0);
    EXPECT_EQ(entry.at("receive_buffers").get<int>(), 2);  // 1 in flight + 1 posted ahead
  }
  EXPECT_GT(json.at("comm_s").get<double>(), 0);
  EXPECT_EQ(json.at("stage_action_costs_s").size(), 2u);
  std::remove(metrics.c_str());
}

// U-Net cut in 4 passes its skip connections' values through stages 1 and 2: what such a
// stage receives, its SEND_F sends on, and MPI's Work holds it to the end of the step. The
// receive buffers come back then: 3 steps allocate no more than 1.
TEST(TrainCli, ReceiveBuffersPassedOnComeBackAtTheEndOfTheStep) {
  std::vector<int64_t> allocated[2];
  for (int run = 0; run < 2; ++run) {
    const std::string metrics = testing::TempDir() + "ppstage_unet_buffers.json";
    const Result r =
        runPpstage("train --model.name " + fixture("unet.pt") +
                       " --model.input_dtype float32 --model.input_shape 8,4,32"
                       " --data.path synthetic --pipeline.stages 4"
                       " --pipeline.microbatches 4 --train.threads 1"
                       " --output.log_every 0 --train.steps " +
                       std::to_string(run == 0 ? 1 : 3) + " --output.metrics_json " + metrics,
                   mpirun(4));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // A model file is described by what was captured, not by the built-in gpt's options.
    EXPECT_NE(r.out.find("  model     " + fixture("unet.pt") + " ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" units, input float32 [8, 4, 32], 0 tied groups)"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("vocab"), std::string::npos) << r.out;
    const nlohmann::json json = readJson(metrics);
    for (const nlohmann::json& rank : json.at("ranks")) {
      allocated[run].push_back(rank.at("receive_buffers").get<int64_t>());
    }
    std::remove(metrics.c_str());
  }
  EXPECT_EQ(allocated[0], allocated[1]);
  EXPECT_EQ(allocated[0].front(), 2) << "rank 0 receives only its gradients";
}

// A schedule from a plugin and one from a CSV table train like the built-in 1F1B: the
// same micro-batches in another order give the same losses (compare-runs, 1e-5).
TEST(TrainCli, PluginAndTableSchedulesTrainLikeTheBuiltIns) {
  const std::string dir = testing::TempDir();
  const std::string common = "train" + config("gpt-tiny.ini") +
                             " --train.steps 4 --output.log_every 0 --train.threads 1"
                             " --pipeline.microbatches 4 --output.metrics_json ";
  ASSERT_EQ(runPpstage(common + dir + "ppstage_1f1b.json", mpirun(2)).exit_code, 0);
  const std::string csv =
      std::string(PPSTAGE_SOURCE_DIR) + "/schedules/examples/1f1b_2stages_4mb.csv";
  for (const auto& [name, options] :
       {std::pair<std::string, std::string>{"table", "--pipeline.schedule " + csv},
        {"plugin", std::string("--pipeline.schedule reverse-gpipe --pipeline.schedule_plugin ") +
                       PPSTAGE_EXAMPLE_PLUGIN}}) {
    const std::string metrics = dir + "ppstage_" + name + ".json";
    const Result run = runPpstage(common + metrics + " " + options, mpirun(2));
    ASSERT_EQ(run.exit_code, 0) << name << "\n" << run.err;
    const Result same = runPpstage("compare-runs --reference " + dir + "ppstage_1f1b.json" +
                                   " --candidate " + metrics);
    EXPECT_EQ(same.exit_code, 0) << name << "\n" << same.out << same.err;
    // Each run described whole: its layout with tp, counts that read as English.
    EXPECT_NE(same.out.find(", 2 stages, pp 2 x dp 1 x tp 1, 4 micro-batches, compile none, "
                            "fp32)"),
              std::string::npos)
        << same.out;
    EXPECT_EQ(same.out.find("()"), std::string::npos) << same.out;
    std::remove(metrics.c_str());
  }
}

// 8 steps are too few to fit memory growth to: no figure (null, n/a), and the steps it
// would be fitted over said, not a slope of 5 noisy steps times 100 that reads as a leak.
TEST(CompareCompile, FewStepsReportNoMemoryGrowth) {
  const Result json = runPpstage("compare-compile" + config("mlp-tiny.ini") +
                                 " --compile.modes none --train.steps 8 --train.threads 1 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json mode = nlohmann::json::parse(json.out).at("modes").at(0);
  EXPECT_TRUE(mode.at("rss_growth_mb_per_100_steps").is_null()) << json.out;
  EXPECT_EQ(mode.at("rss_growth_steps").get<int>(), 5);
  const Result text = runPpstage("compare-compile" + config("mlp-tiny.ini") +
                                 " --compile.modes none,block --train.steps 8 --train.threads 1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("n/a"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("these runs had 5 (--train.steps 8)"), std::string::npos) << text.out;
  // Which mode to use, and why nothing fused on this CPU.
  EXPECT_NE(text.out.find("\nfastest: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("0 fusion groups: LibTorch does not fuse kernels on the CPU"),
            std::string::npos)
      << text.out;
}

// Where a compiled mode keeps more activation memory than none, the advice says how much
// and why (gpt-tiny as one stage: block holds about 1.15x none's, 7.8 MB against 6.8).
TEST(CompareCompile, SaysWhyACompiledModeHoldsMoreActivations) {
  const std::string run = "compare-compile" + config("gpt-tiny.ini") +
                          " --pipeline.stages 1 --compile.modes none,block --train.steps 6 "
                          "--train.threads 1";
  const Result json = runPpstage(run + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json modes = nlohmann::json::parse(json.out).at("modes");
  const double ratio = modes.at(1).at("peak_activation_mb").get<double>() /
                       modes.at(0).at("peak_activation_mb").get<double>();
  const Result text = runPpstage(run);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const bool said = text.out.find("\nactivations: block ") != std::string::npos &&
                    text.out.find("differentiated ahead of time") != std::string::npos;
  std::cout << "block over none's peak activations: " << ratio << "\n";
  EXPECT_GT(ratio, 1.05) << json.out;  // what gpt-tiny shows; the line follows it
  EXPECT_EQ(said, ratio > 1.05) << text.out;
}

// compare-compile runs every mode on the same training: the same losses, identical blocks
// compiled once, and no memory growth. 200 steps of mlp-tiny per mode; the bound on growth
// is generous (allocator noise is a few MB), a leak of a step's activations is not.
TEST(CompareCompile, EveryModeTrainsTheSameWithoutGrowingMemory) {
  const Result r = runPpstage("compare-compile" + config("mlp-tiny.ini") +
                              " --train.steps 200 --train.threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.at("modes").size(), 3u) << r.out;
  for (const nlohmann::json& mode : json.at("modes")) {
    const std::string name = mode.at("mode");
    for (const char* field : {"compile_time_s", "graphs_compiled", "cache_hits", "step_time_s",
                              "peak_rss_mb", "rss_growth_mb_per_100_steps", "loss_max_rel_diff"}) {
      EXPECT_TRUE(mode.contains(field)) << name << " lacks " << field;
    }
    std::cout << name << ": RSS growth " << mode.at("rss_growth_mb_per_100_steps").get<double>()
              << " MB per 100 steps, loss rel diff " << mode.at("loss_max_rel_diff").get<double>()
              << ", graphs " << mode.at("graphs_compiled").get<int>() << ", hits "
              << mode.at("cache_hits").get<int>() << "\n";
    EXPECT_LE(mode.at("loss_max_rel_diff").get<double>(), 1e-5) << name;
    EXPECT_LT(mode.at("rss_growth_mb_per_100_steps").get<double>(), 16.0) << name;
  }
  // mlp-tiny has 8 identical residual blocks. The first reads the model's input, which needs
  // no gradient, so it gets its own executor (the profiling executor specializes on
  // requires_grad); the other 7 share one (6 hits); the head is the third graph.
  EXPECT_EQ(json.at("modes").at(0).at("graphs_compiled").get<int>(), 0);  // none
  EXPECT_EQ(json.at("modes").at(2).at("graphs_compiled").get<int>(), 3);
  EXPECT_EQ(json.at("modes").at(2).at("cache_hits").get<int>(), 6);
}

// Each mode's peak memory is its own: listed first, stage still runs last, so block and
// none do not start from the heap that optimizing a whole 8-layer graph leaves resident
// (about 60 MB more than block's here). The rows keep the order listed.
TEST(CompareCompile, EachModesPeakMemoryIsItsOwn) {
  const Result r = runPpstage(
      "compare-compile --model.layers 8 --model.d_model 64 --model.heads 4 --model.seq_len 32 "
      "--train.batch_size 2 --pipeline.stages 1 --pipeline.microbatches 1 --train.steps 4 "
      "--train.threads 1 --data.path synthetic --compile.modes stage,block,none --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json modes = nlohmann::json::parse(r.out).at("modes");
  ASSERT_EQ(modes.size(), 3u) << r.out;
  EXPECT_EQ(modes.at(0).at("mode"), "stage");
  EXPECT_EQ(modes.at(2).at("mode"), "none");
  const double stage = modes.at(0).at("peak_rss_mb"), block = modes.at(1).at("peak_rss_mb"),
               none = modes.at(2).at("peak_rss_mb");
  std::cout << "peak RSS MB: stage " << stage << ", block " << block << ", none " << none << "\n";
  EXPECT_LT(block, stage - 20) << r.out;
  EXPECT_LT(none, stage - 20) << r.out;
  EXPECT_LE(modes.at(0).at("loss_max_rel_diff").get<double>(), 1e-5) << r.out;  // vs none
}

// Under mpirun: gpt-tiny (tied embeddings) in 2 stages on 2 ranks, one table from rank 0.
// Every compile mode's losses match none's; the graph counts are summed over the ranks.
TEST(CompareCompile, PipelinedOnTwoRanksEveryModeMatchesNone) {
  const Result r = runPpstage(
      "compare-compile" + config("gpt-tiny.ini") + " --train.steps 10 --train.threads 1 --json",
      mpirun(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);  // one document: rank 0 prints
  ASSERT_EQ(json.at("modes").size(), 3u) << r.out;
  for (const nlohmann::json& mode : json.at("modes")) {
    EXPECT_LE(mode.at("loss_max_rel_diff").get<double>(), 1e-5) << mode.at("mode");
  }
  // stage: one executor per rank. block: rank 0 compiles the embedding segment and a block
  // (the second block hits); rank 1 a block (the second hits) and the head.
  EXPECT_EQ(json.at("modes").at(1).at("graphs_compiled").get<int>(), 2);
  EXPECT_EQ(json.at("modes").at(2).at("graphs_compiled").get<int>(), 4);
  EXPECT_EQ(json.at("modes").at(2).at("cache_hits").get<int>(), 2);
}

// Exit code 2 from every rank, and exactly one `ppstage: error:` line (rank 0's) naming
// the problem. mpirun adds its own banner about the exit codes.
void expectBadTrainInput(int np, const std::string& args, const std::string& what) {
  const Result r =
      runPpstage("train" + config("gpt-tiny.ini") + " --train.steps 2 " + args, mpirun(np));
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  size_t lines = 0;
  for (size_t at = r.err.find("ppstage: error: "); at != std::string::npos;
       at = r.err.find("ppstage: error: ", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << "expected '" << what << "' in: " << r.err;
  EXPECT_EQ(r.err.find("MPI_ABORT"), std::string::npos) << "no rank should need killing: " << r.err;
}

TEST(TrainCli, BatchNotDivisibleByMicroBatches) {
  expectBadTrainInput(2, "--train.batch_size 6 --pipeline.microbatches 4",
                      "--train.batch_size 6 is not divisible by --train.dp 1 x "
                      "--pipeline.microbatches 4");
}

TEST(TrainCli, FewerMicroBatchesThanTheScheduleNeeds) {
  expectBadTrainInput(2, "--pipeline.schedule zb-h1 --pipeline.microbatches 1",
                      "zb-h1 needs at least as many micro-batches as stages (2)");
}

TEST(TrainCli, StagesNotDivisibleByRanks) {
  expectBadTrainInput(2, "--pipeline.stages 3",
                      "3 stages cannot be spread evenly over 2 pipeline ranks");
}

TEST(TrainCli, WorldSizeNotPipelineTimesDataParallel) {
  expectBadTrainInput(3, "--train.dp 2", "3 ranks cannot form 2 data-parallel replicas");
}

TEST(TrainCli, WorldSizeNotPipelineTimesTensorParallel) {
  expectBadTrainInput(3, "--train.tp 2",
                      "3 ranks cannot form 1 data-parallel replica of pipeline ranks of 2 "
                      "tensor-parallel ranks");
  expectBadTrainInput(2, "--train.tp 0", "--train.tp must be at least 1; got 0");
  // A schedule table made for the world's ranks, not its pipeline ranks (2 ranks at tp 2
  // are one pipeline rank).
  expectBadTrainInput(2,
                      "--train.tp 2 --pipeline.schedule " + std::string(PPSTAGE_SOURCE_DIR) +
                          "/schedules/examples/1f1b_2stages_4mb.csv",
                      "1f1b_2stages_4mb.csv has 2 stages but --pipeline.stages is 1");
}

// Heads that do not divide by tp: the attention stays replicated (the start-up lines say
// why), unless --train.tp_require names it.
TEST(TrainCli, TensorParallelRegionRequiredButNotShardable) {
  expectBadTrainInput(2,
                      "--train.tp 2 --model.d_model 48 --model.heads 3 "
                      "--train.tp_require 'layers\\.[0-9]+\\.attn.*'",
                      "into [8, 64, 3, 16] leaves no dimension holding whole shards (heads that "
                      "do not divide by tp 2?)) and --train.tp_require");
}

TEST(TrainCli, DataFileMissing) {
  expectBadTrainInput(2, "--data.path /nonexistent/ppstage.txt",
                      "cannot read the data file --data.path '/nonexistent/ppstage.txt': No "
                      "such file or directory");
}

TEST(TrainCli, DataFileShorterThanOneSequence) {
  const std::string path = testing::TempDir() + "ppstage_short.txt";
  std::ofstream(path) << "too short";
  expectBadTrainInput(2, "--data.path " + path,
                      "has 9 bytes, shorter than one sequence of 64 tokens");
  std::remove(path.c_str());
}

TEST(TrainCli, UnknownOption) {
  expectBadTrainInput(2, "--train.bogus 1", "unrecognised option '--train.bogus'");
}

TEST(TrainCli, HelpListsEveryTrainSection) {
  const Result r = runPpstage("train --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* option : {"--pipeline.schedule", "--pipeline.microbatches", "--compile.mode",
                             "--train.steps", "--train.lr", "--train.weight_decay",
                             "--train.grad_clip", "--train.optimizer", "--train.loss", "--train.dp",
                             "--data.path", "--output.log_every", "--output.metrics_json"}) {
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
  }
  // Defaults as written, not as the nearest double prints at full precision.
  EXPECT_NE(r.out.find("--train.lr arg (=0.003)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("0000000"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ppstage

namespace ppstage {
namespace {

// A model that fails only on a micro-batch of one sample: the one line names the stage,
// micro-batch and step, the real cause and the module; every rank exits non-zero.
TEST(TrainCli, AModelFailingInTrainingSaysWhere) {
  const Result r = runPpstage("train --model.name " + fixture("squeeze_batch.pt") +
                                  " --model.input_dtype float32 --model.input_shape 4,4,8"
                                  " --train.batch_size 4 --pipeline.microbatches 4"
                                  " --data.path synthetic --train.steps 2",
                              mpirun(2));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("stage 1, micro-batch 0, step 1: forward fails: Dimension out of range"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(in module 'mixer', aten::transpose)"), std::string::npos) << r.err;
}

// Rank 0 prints every stage's parameter count, also of the stages other ranks hold.
TEST(TrainCli, ThePlanTableCountsTheParametersOfEveryRanksStages) {
  const Result r = runPpstage("train" + config("gpt-tiny.ini") + " --train.steps 3", mpirun(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A short run's closing line compares windows that do not overlap: 1 step and 1 step.
  EXPECT_NE(r.out.find("(mean of the first and last 1), median step"), std::string::npos) << r.out;
  std::istringstream lines(r.out);
  std::vector<std::string> params;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string stage, modules, count;
    words >> stage >> modules >> count;
    if (stage == "0" || stage == "1") params.push_back(count);
  }
  ASSERT_EQ(params.size(), 2u) << r.out;
  for (const std::string& count : params) EXPECT_NE(count, "0") << r.out;
}

// Evaluation takes whole batches: where the validation set ends in part of one, the
// start-up line says how many samples are left out (GPL-3's 35149 bytes are 549 sequences
// of 64: 68 batches of 8 and 5 left).
TEST(TrainCli, EvaluationSaysWhatItLeavesOut) {
  const std::string text = "/usr/share/common-licenses/GPL-3";
  if (!std::ifstream(text).good()) GTEST_SKIP() << text << " is not installed (base-files)";
  const Result r = runPpstage("train" + config("gpt-tiny.ini") +
                                  " --train.steps 1 --eval.every 1 --eval.batches 1000 "
                                  "--data.val_path " +
                                  text,
                              mpirun(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("68 batches of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", the last 5 samples (less than a batch of 8) not evaluated"),
            std::string::npos)
      << r.out;
}

// Resuming with another --train.steps reshapes a cosine schedule from the step resumed at:
// the run says so, naming both values.
TEST(TrainCli, ResumingWithOtherStepsWarnsThatTheScheduleChanges) {
  const std::string dir = testing::TempDir() + "ppstage_resume_steps";
  std::filesystem::remove_all(dir);
  const std::string common = "train" + config("gpt-tiny.ini") +
                             " --train.lr_schedule cosine --checkpoint.dir " + dir +
                             " --checkpoint.resume true --train.steps ";
  const Result first = runPpstage(common + "4", mpirun(2));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out.find("warning: the checkpoint"), std::string::npos) << first.out;
  const Result longer = runPpstage(common + "8", mpirun(2));
  ASSERT_EQ(longer.exit_code, 0) << longer.err;
  EXPECT_NE(longer.out.find("warning: the checkpoint was saved by a run of --train.steps 4 "
                            "(lr_schedule cosine); this run has --train.steps 8, so its cosine "
                            "learning rate from step 5 on follows a schedule over 8 steps, not 4"),
            std::string::npos)
      << longer.out;
  std::filesystem::remove_all(dir);
}

// Balanced by time on 2 ranks: both measure the units and plan with their averaged
// costs (a cut the ranks disagreed on would fail the boundary check or hang), and the log
// gives the planner's cut with its predicted step, no slower than the params cut's.
TEST(TrainCli, BalanceByTimePlansTheSameStagesOnEveryRank) {
  const Result r = runPpstage(
      "train" + config("gpt-tiny.ini") + " --train.steps 2 --pipeline.balance time", mpirun(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string key = "pipeline.balance time: 1f1b dp1 pp2 M4 cut at ";
  const size_t at = r.out.find(key);
  ASSERT_NE(at, std::string::npos) << r.out;
  char point[64] = {0};
  double step = 0, params = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at + key.size(),
                        "%63[^,], predicted step %lf s (balanced by params: %lf s)", point, &step,
                        &params),
            3)
      << r.out;
  EXPECT_GT(step, 0);
  EXPECT_LE(step, params) << "the params cut is taken where it predicts a shorter step";
  EXPECT_NE(r.out.find("measured in compile mode none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stages over 8 units, balanced by time"), std::string::npos) << r.out;
}

TEST(TrainCli, AnRnnsInterLayerDropoutIsRefused) {
  const Result r = runPpstage("train --model.name " + fixture("lstm_dropout.pt") +
                                  " --model.vocab_size 16 --model.seq_len 16 --train.steps 1",
                              mpirun(2));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("the model's aten::lstm at 'lstm' applies dropout between its layers"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace ppstage
