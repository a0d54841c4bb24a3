// The checkpoint box on its own (src/checkpoint), against references: SHA-256 against FIPS
// 180-4's test vectors, the manifest through JSON and back, completeness (a checkpoint is
// complete exactly when its manifest exists and every file matches), pruning, atomic
// writes, the model identity (stored paths of tied tensors, refusals naming the tensor), the
// optimizer state round trip (a restored AdamW steps exactly as the original), the gather
// the ranks agree on a save with, and the stop signal.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/optimizer.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ppstage/checkpoint/checkpoint_dir.h"
#include "ppstage/checkpoint/manifest.h"
#include "ppstage/checkpoint/model_identity.h"
#include "ppstage/checkpoint/sha256.h"
#include "ppstage/comm/agreement.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/runtime/optimizer.h"
#include "ppstage/split/model_split.h"
#include "ppstage/train/stop_signal.h"
#include "support/local_ranks.h"

namespace fs = std::filesystem;

namespace ppstage {
namespace {

TEST(Sha256, MatchesTheStandardsTestVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

class CheckpointDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("ppstage-ck-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint of one file at `step`, complete unless `manifest` is false.
  std::string save(int64_t step, bool manifest = true) {
    const std::string step_dir = dir_ + "/" + checkpointName(step);
    fs::create_directories(step_dir);
    const std::string bytes = "tensor bytes of step " + std::to_string(step);
    writeFileAtomically(step_dir + "/tensors-stage0.pt", bytes);
    Manifest m;
    m.step = step;
    m.random_keys = {{"drop#random_key", 7}};
    m.tensors = {{"w", {2, 3}, "float32", "tensors-stage0.pt", true, ""}};
    m.files = {{"tensors-stage0.pt", static_cast<int64_t>(bytes.size()), sha256Hex(bytes)}};
    if (manifest) writeFileAtomically(step_dir + "/manifest.json", manifestToJson(m));
    return step_dir;
  }

  std::string dir_;
};

TEST_F(CheckpointDir, ManifestSurvivesJson) {
  save(3);
  Manifest m;
  ASSERT_EQ(whyIncomplete(dir_ + "/step-00000003", &m), "");
  EXPECT_EQ(m.step, 3);
  EXPECT_EQ(m.random_keys.at("drop#random_key"), 7);
  ASSERT_EQ(m.tensors.size(), 1u);
  EXPECT_EQ(m.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(manifestFromJson("{\"format\": \"other\"}", "x"), Error);
}

TEST_F(CheckpointDir, NewestCompleteOneIsFoundAndDamagedOnesAreSkipped) {
  std::vector<std::string> warnings;
  EXPECT_FALSE(findNewestCheckpoint(dir_ + "/missing", warnings).has_value());
  save(2);
  const std::string truncated = save(4);
  fs::resize_file(truncated + "/tensors-stage0.pt", 3);
  save(6, /*manifest=*/false);
  const auto found = findNewestCheckpoint(dir_, warnings);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->manifest.step, 2);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("step-00000006: manifest.json is missing"), std::string::npos);
  EXPECT_NE(warnings[1].find("tensors-stage0.pt has 3 bytes, the manifest says"),
            std::string::npos);
  // Same size, other bytes: the checksum tells.
  const std::string corrupt = save(8);
  std::ofstream(corrupt + "/tensors-stage0.pt", std::ios::binary) << "tensor bytes of step 9";
  EXPECT_EQ(whyIncomplete(corrupt, nullptr), "tensors-stage0.pt does not match its checksum");
}

TEST_F(CheckpointDir, PruningKeepsTheNewestCompleteOnes) {
  for (int64_t step : {1, 2, 3, 4}) save(step);
  save(5, /*manifest=*/false);  // being written: newer than every complete one
  save(0, /*manifest=*/false);  // an old crash
  pruneCheckpoints(dir_, 2);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"step-00000003", "step-00000004", "step-00000005"}));
}

TEST_F(CheckpointDir, AtomicWriteReplacesWholeAndLeavesNoTemporary) {
  const std::string path = dir_ + "/file";
  writeFileAtomically(path, "old");
  writeFileAtomically(path, "new content");
  EXPECT_EQ(readFile(path, "test file"), "new content");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(entries, 1);
  EXPECT_THROW(writeFileAtomically(dir_ + "/no/such/dir/file", "x"), Error);
  EXPECT_THROW(checkWritableDirectory(path + "/sub", "checkpoint.dir"), Error);
  EXPECT_NO_THROW(checkWritableDirectory(dir_ + "/new/sub", "checkpoint.dir"));
  EXPECT_THROW(checkWritableFile(dir_, "output.metrics_json"), Error);  // a directory
}

TEST(ModelIdentity, TiedTensorsAreStoredOnceAndOtherShapesAreNamed) {
  Config config;
  config.model.layers = 2;
  config.model.d_model = 32;
  config.pipeline.stages = 2;
  const ModelSplit split = splitModel(config);
  const std::vector<SavedTensor> tensors = modelTensors(split.graph);
  int lm_head = 0, wte = 0;
  for (const SavedTensor& t : tensors) {
    lm_head += t.path == "lm_head.weight";
    wte += t.path == "wte.weight";
  }
  EXPECT_EQ(wte, 1);
  EXPECT_EQ(lm_head, 0);  // stored as wte.weight

  Manifest same;
  same.tensors = tensors;
  same.model_hash = modelHash(split.graph);
  EXPECT_NO_THROW(checkSameModel(same, "D/step-00000001", split.graph));
  Config wider = config;
  wider.model.d_model = 64;
  const ModelSplit other = splitModel(wider);
  EXPECT_NE(modelHash(other.graph), same.model_hash);
  try {
    checkSameModel(same, "D/step-00000001", other.graph);
    FAIL() << "another model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("wte.weight: checkpoint has [256, 32], model has [256, 64]"),
        std::string::npos)
        << e.what();
  }
  Config more_heads = config;
  more_heads.model.heads = 2;  // the same tensors, another graph
  EXPECT_THROW(checkSameModel(same, "D", splitModel(more_heads).graph), Error);
  // The hash does not depend on the layout.
  Config one_stage = config;
  one_stage.pipeline.stages = 1;
  one_stage.train.batch_size = 4;
  EXPECT_EQ(modelHash(splitModel(one_stage).graph), same.model_hash);
}

// train releases the loaded model's tensors once the stages hold their copies: what a
// checkpoint's manifest and the model summary read of the graph stays (shapes, dtypes, tied
// paths counted once, random keys' values), and the stages keep their own values.
TEST(ModelIdentity, ReleasingTheLoadedTensorsKeepsWhatManifestsRead) {
  Config config;
  config.model.layers = 2;
  config.model.d_model = 32;
  config.model.dropout = 0.1;  // keyed dropout: random keys among the parameters
  config.pipeline.stages = 2;
  ModelSplit split = splitModel(config);
  Manifest before;
  before.tensors = modelTensors(split.graph);
  before.model_hash = modelHash(split.graph);
  const std::map<std::string, int64_t> keys = randomKeys(split.graph);
  ASSERT_FALSE(keys.empty());
  before.random_keys = keys;
  const int64_t trainable = split.graph.numTrainableParams();
  const at::Tensor stage_value = split.stages.at(1).parameters.at(0).value.clone();

  releaseLoadedTensors(split);
  EXPECT_EQ(modelHash(split.graph), before.model_hash);
  EXPECT_NO_THROW(checkSameModel(before, "D/step-00000001", split.graph));
  EXPECT_EQ(randomKeys(split.graph), keys);
  EXPECT_EQ(split.graph.numTrainableParams(), trainable);  // wte and lm_head still one tensor
  for (const ModelParameter& p : split.graph.parameters) {
    EXPECT_EQ(p.value.device().type() == c10::DeviceType::Meta, !p.random_key) << p.path;
  }
  EXPECT_TRUE(at::equal(split.stages.at(1).parameters.at(0).value, stage_value));
}

// A restored AdamW state steps exactly like the state it was taken from.
TEST(OptimizerState, AdamWRoundTripIsExact) {
  auto makeParam = [] { return at::arange(6, at::kFloat).reshape({2, 3}).requires_grad_(); };
  TrainConfig train;
  at::Tensor a = makeParam(), b = makeParam();
  auto first = makeOptimizer(train, {a});
  for (int step = 0; step < 3; ++step) {
    a.mutable_grad() = at::full({2, 3}, 0.5f + step);
    stepAndClear(*first, {a});
  }
  {
    at::NoGradGuard no_grad;
    b.copy_(a);
  }
  auto second = makeOptimizer(train, {b});
  setOptimizerState(*second, b, optimizerState(*first, a), "w");
  EXPECT_EQ(optimizerState(*second, b).at("step").item<int64_t>(), 3);
  a.mutable_grad() = at::full({2, 3}, -1.0f);
  b.mutable_grad() = at::full({2, 3}, -1.0f);
  stepAndClear(*first, {a});
  stepAndClear(*second, {b});
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_THROW(setOptimizerState(*second, b, {{"step", at::scalar_tensor(1, at::kLong)}}, "w"),
               Error);
}

TEST(AllGatherStrings, EveryRankGetsEveryRanksString) {
  test::runRanks(3, [](int rank, Communicator& comm) {
    const std::vector<std::string> all = allGatherStrings(
        comm, rank == 1 ? "" : std::string(static_cast<size_t>(rank + 2), 'a' + rank));
    EXPECT_EQ(all, (std::vector<std::string>{"aa", "", "cccc"}));
  });
}

// The first signal is recorded, a copy within a second is ignored (but a SIGINT then is
// the user's Ctrl-C, which mpirun passes on as SIGTERM), a later one ends the process at
// once (in a child process: gtest's death test).
TEST(StopSignal, FirstIsRecordedSecondEndsTheProcess) {
  {
    StopSignal stop;
    EXPECT_EQ(StopSignal::received(), 0);
    std::raise(SIGTERM);
    EXPECT_EQ(StopSignal::received(), SIGTERM);
    std::raise(SIGTERM);  // a copy of the same stop, moments later
    EXPECT_EQ(StopSignal::received(), SIGTERM);
    std::raise(SIGINT);  // Ctrl-C, which reached the rank after mpirun's SIGTERM
    EXPECT_EQ(StopSignal::received(), SIGINT);
  }
  EXPECT_EXIT(
      {
        StopSignal stop;
        std::raise(SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        std::raise(SIGTERM);
        std::exit(0);  // not reached
      },
      ::testing::ExitedWithCode(128 + SIGTERM), "second SIGTERM, ending now");
}

}  // namespace
}  // namespace ppstage
