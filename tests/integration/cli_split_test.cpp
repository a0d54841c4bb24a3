// `ppstage split` as a user runs it: the table, the JSON fields the issue names, and one
// line `ppstage: error: ...` with exit code 2 for each kind of bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

std::string fixture(const std::string& name) { return test::fixturePath(name); }

TEST(CliSplit, PrintsATable) {
  const Result r = runPpstage("split --pipeline.stages 4 --model.layers 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("stage  modules"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wte.weight (stage 0) = lm_head.weight (stage 3)"), std::string::npos)
      << r.out;
}

TEST(CliSplit, JsonHasTheDocumentedFields) {
  const Result r = runPpstage("split --config " + std::string(PPSTAGE_SOURCE_DIR) +
                              "/configs/gpt-tiny.ini --pipeline.split_points layers.2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  ASSERT_EQ(plan.at("stages").size(), 2u);
  int64_t total = 0;
  for (const auto& stage : plan.at("stages")) {
    for (const char* key : {"index", "modules", "num_params", "inputs", "outputs"}) {
      EXPECT_TRUE(stage.contains(key)) << key;
    }
    total += stage.at("num_params").get<int64_t>();
  }
  EXPECT_EQ(plan.at("stages")[1].at("modules")[0], "layers.2");
  const auto& boundary = plan.at("stages")[0].at("outputs")[0];
  EXPECT_EQ(boundary.at("shape").size(), 3u) << "(batch, seq, d_model)";
  ASSERT_EQ(plan.at("tied_parameters").size(), 1u);
  // The tied tensor is held once per stage, so the stages hold it twice.
  const int64_t tied = plan.at("stages")[0].at("parameters")[0].at("shape")[0].get<int64_t>() *
                       plan.at("stages")[0].at("parameters")[0].at("shape")[1].get<int64_t>();
  EXPECT_EQ(total, plan.at("num_params").get<int64_t>() + tied);
}

// --data.path as in train: the model is captured on the data's first samples, so a model
// of images needs no shape flags, and the JSON gives each boundary's dims.
TEST(CliSplit, CapturesOnTheDataFile) {
  const Result r = runPpstage("split --model.name " + fixture("data/small_resnet.pt") +
                              " --data.path " + fixture("data/tiny-images-idx3-ubyte.gz") +
                              " --data.targets " + fixture("data/tiny-labels-idx1-ubyte.gz") +
                              " --train.batch_size 4 --pipeline.stages 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan.at("input").at("shape"), (std::vector<int64_t>{4, 1, 8, 8}));
  const auto& boundary = plan.at("stages")[0].at("outputs")[0];
  EXPECT_EQ(boundary.at("dims")[0], "b");
  EXPECT_EQ(boundary.at("dims").size(), boundary.at("shape").size());
}

// --train.tp: per stage, the regions the pass shards (gpt-tiny: each block's attention and
// MLP), why the others stay whole, and the all-reduces each micro-batch costs.
TEST(CliSplit, TensorParallelRegionsPerStage) {
  const Result r = runPpstage("split --config " + std::string(PPSTAGE_SOURCE_DIR) +
                              "/configs/gpt-tiny.ini --pipeline.split_points layers.2 "
                              "--train.tp 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json tp = nlohmann::json::parse(r.out).at("tensor_parallel");
  EXPECT_EQ(tp.at("tp"), 2);
  ASSERT_EQ(tp.at("stages").size(), 2u);
  const auto& first = tp.at("stages")[0];
  ASSERT_GE(first.at("regions").size(), 2u);
  EXPECT_EQ(first.at("regions")[0].at("module"), "layers.0.attn");
  EXPECT_TRUE(first.at("regions")[0].at("sharded"));
  EXPECT_EQ(first.at("forward_all_reduces"), first.at("regions").size());
  const auto& last = tp.at("stages")[1].at("regions").back();
  EXPECT_EQ(last.at("module"), "lm_head");
  EXPECT_FALSE(last.at("sharded"));
  EXPECT_FALSE(last.at("why").get<std::string>().empty());
  const Result text = runPpstage("split --config " + std::string(PPSTAGE_SOURCE_DIR) +
                                 "/configs/gpt-tiny.ini --train.tp 2");
  EXPECT_NE(text.out.find("layers.0.mlp sharded (column layers.0.mlp.fc.weight; row "
                          "layers.0.mlp.proj.weight)"),
            std::string::npos)
      << text.out;
}

TEST(CliSplit, UserModelFile) {
  const Result r = runPpstage("split --model.name " + fixture("unet.pt") +
                              " --model.input_dtype float32 --model.input_shape 2,4,32 "
                              "--pipeline.stages 3 --pipeline.balance flops --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan.at("stages").size(), 3u);
  EXPECT_EQ(plan.at("method"), "flops");
}

// The default cut balances FLOPs: a GPT whose vocabulary is most of its parameters (an
// embedding's parameters cost almost no compute) gets its blocks spread by compute, not
// its embedding alone on stage 0 as balancing parameters did; the heading says what was
// balanced and the imbalance left (the LM head, one unit, is the largest stage).
TEST(CliSplit, DefaultBalancesFlopsAndSaysTheImbalance) {
  const std::string gpt = "split --model.vocab_size 8192 --model.seq_len 64 --pipeline.stages 3";
  const Result json = runPpstage(gpt + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json plan = nlohmann::json::parse(json.out);
  EXPECT_EQ(plan.at("method"), "flops");
  EXPECT_NE(plan.at("stages").at(0).at("modules").size(), 1u) << json.out;  // not wte alone
  const double imbalance = plan.at("imbalance").get<double>();
  EXPECT_GT(imbalance, 1.0);
  const Result text = runPpstage(gpt);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("3 stages over 8 units, balanced by flops, imbalance "),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("stage 2 is the single unit lm_head, which no cut makes smaller"),
            std::string::npos)
      << text.out;
  const Result params = runPpstage(gpt + " --pipeline.balance params");
  EXPECT_NE(params.out.find("balanced by params, imbalance "), std::string::npos) << params.out;
}

TEST(CliSplit, HelpDocumentsEveryFlag) {
  const Result r = runPpstage("split --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--model.name", "--model.layers", "--model.d_model", "--model.heads", "--model.vocab_size",
        "--model.seq_len", "--model.tie_embeddings", "--model.input_dtype", "--model.input_shape",
        "--pipeline.stages", "--pipeline.split_points", "--pipeline.balance", "--train.batch_size",
        "--json", "--config"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

TEST(CliSplit, SplitPointNotFoundListsValidModules) {
  expectBadInput("split --pipeline.split_points layer.3", "layers.0, layers.1, layers.2");
}

TEST(CliSplit, MoreStagesThanUnits) {
  expectBadInput("split --model.layers 2 --pipeline.stages 9", "only 6 splittable units");
}

TEST(CliSplit, ModelFileMissing) {
  expectBadInput("split --model.name /nonexistent/model.pt", "not found");
}

TEST(CliSplit, ModelFileNotTorchScript) {
  const std::string path = testing::TempDir() + "not_a_model_" + std::to_string(getpid()) + ".pt";
  std::ofstream(path) << "this is not a zip archive\n";
  expectBadInput("split --model.name " + path, "cannot load");
}

TEST(CliSplit, UnsupportedForwardInput) {
  expectBadInput("split --model.name " + fixture("two_inputs.pt") +
                     " --model.input_dtype float32 --model.input_shape 2,8",
                 "takes 'y' (Tensor, no default), which no data input feeds");
}

// Token ids beyond an nn.Embedding's rows: the cause and the module, on one line.
TEST(CliSplit, AModelFailingOnItsExampleSaysWhere) {
  expectBadInput(
      "split --model.name " + fixture("hf_gpt2.pt") + " --model.vocab_size 200 --model.seq_len 16",
      "index out of range in self (in module 'transformer.wte', aten::embedding)");
}

TEST(CliSplit, NonTensorValueThatCannotCrossACut) {
  expectBadInput("split --model.name " + fixture("data_dependent.pt") +
                     " --model.input_dtype float32 --model.input_shape 2,8 "
                     "--pipeline.split_points second",
                 "depends on tensor data");
}

TEST(CliSplit, BadOptions) {
  expectBadInput("split --pipeline.balance speed", "--pipeline.balance");
  expectBadInput("split --model.layerz 3", "layerz");
  // An abbreviation is refused as a config file refuses it, not guessed (--model.layers).
  expectBadInput("split --model.layer 3", "unrecognised option '--model.layer'");
  expectBadInput("split --train.batch 4", "unrecognised option '--train.batch'");
  expectBadInput("splitt", "unknown command 'splitt'");
}

}  // namespace
}  // namespace ppstage
