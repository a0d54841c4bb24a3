// Data files (data/data_files.h) against what wrote them: token windows from bare and
// headed token files, .npy arrays (folders, widening, refusals), torch.save dicts, gzipped
// IDX files; text and synthetic data sets and the sample order; the roles of a data set's
// fields; the loss as a sum over counted targets and its layouts; the learning-rate
// schedule against its formula.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "ppstage/data/data_files.h"
#include "ppstage/data/dataset.h"
#include "ppstage/data/embedded_text.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/train/lr_schedule.h"
#include "support/error_of.h"

namespace ppstage {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the test's temporary directory.
std::string freshDir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("ppstage_data_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <typename T>
std::string bytesOf(const std::vector<T>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)};
}

// An .npy file (version 1.0) of `descr` and `shape` holding `data`.
std::string npy(const std::string& descr, const std::vector<int64_t>& shape,
                const std::string& data, bool fortran = false) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': (" + dims + "), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  const auto length = static_cast<uint16_t>(dict.size());
  return std::string("\x93NUMPY\x01\x00", 8) +
         std::string(reinterpret_cast<const char*>(&length), 2) + dict + data;
}

DataConfig dataAt(const std::string& path) {
  DataConfig config;
  config.path = path;
  return config;
}

TEST(DataFiles, BareUint16TokensAreWindowsOfInputsAndNextTokens) {
  const std::string path = freshDir("tokens") + "/train.bin";
  std::vector<uint16_t> tokens(41);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(60000 + i);
  writeBytes(path, bytesOf(tokens));
  EXPECT_EQ(resolveDataFormat(dataAt(path)), DataFormat::kTokens);
  const auto data = openDataFile(dataAt(path), 8);
  EXPECT_EQ(data->size(), 5);  // (41 - 1) / 8
  EXPECT_EQ(data->fields().at(0).name, "input_ids");
  EXPECT_EQ(data->sample(0, 2)[0].item<int64_t>(), 60016);  // beyond int16: read unsigned
  EXPECT_EQ(data->sample(1, 2)[7].item<int64_t>(), 60024);
  // Over the whole file, the last token too (no window holds it as an input).
  EXPECT_EQ(data->valueRange(0, -100), std::make_pair(int64_t{60000}, int64_t{60040}));
  EXPECT_EQ(data->valueRange(1, 60040), std::make_pair(int64_t{60000}, int64_t{60039}));
}

TEST(DataFiles, TokenHeadersChooseTheDtypeAndMustAgreeWithTheSize) {
  const std::string dir = freshDir("header");
  std::vector<int32_t> header(256, 0);
  header[0] = 20240801;  // llm.c's uint32 layout, version 7
  header[1] = 7;
  header[2] = 17;
  std::vector<uint32_t> tokens(17);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = 100000 + static_cast<uint32_t>(i);
  writeBytes(dir + "/a.dat", bytesOf(header) + bytesOf(tokens));
  DataConfig config = dataAt(dir + "/a.dat");
  EXPECT_EQ(resolveDataFormat(config), DataFormat::kTokens);  // by its magic number
  const auto data = openDataFile(config, 4);
  EXPECT_EQ(data->size(), 4);
  EXPECT_EQ(data->sample(1, 3)[3].item<int64_t>(), 100016);
  header[2] = 18;
  writeBytes(dir + "/b.dat", bytesOf(header) + bytesOf(tokens));
  EXPECT_NE(test::errorOf([&] {
              openDataFile(dataAt(dir + "/b.dat"), 4);
            }).find("header says 18 tokens (72 bytes) but 68 bytes follow it"),
            std::string::npos);
}

TEST(DataFiles, BadTokenFilesAreRefusedNamingTheFile) {
  const std::string dir = freshDir("bad_tokens");
  writeBytes(dir + "/odd.bin", "abc");
  writeBytes(dir + "/empty.bin", "");
  writeBytes(dir + "/short.bin", std::string(8, 'a'));
  EXPECT_NE(test::errorOf([&] {
              openDataFile(dataAt(dir + "/odd.bin"), 2);
            }).find("has 3 bytes of tokens, not a multiple of 2 (uint16)"),
            std::string::npos);
  EXPECT_NE(test::errorOf([&] { openDataFile(dataAt(dir + "/empty.bin"), 2); }).find("is empty"),
            std::string::npos);
  EXPECT_NE(test::errorOf([&] {
              openDataFile(dataAt(dir + "/short.bin"), 4);
            }).find("has 4 tokens, fewer than one sequence of 4"),
            std::string::npos);
  EXPECT_NE(test::errorOf([&] {
              openDataFile(dataAt(dir + "/missing.bin"), 4);
            }).find("cannot read the data file --data.path"),
            std::string::npos);
}

TEST(DataFiles, NpyFolderGivesOneNamedFieldPerFile) {
  const std::string dir = freshDir("npy");
  const std::vector<float> x = {0, 1, 2, 3, 4, 5};
  const std::vector<uint16_t> labels = {65535, 2, 1};
  writeBytes(dir + "/x.npy", npy("<f4", {3, 2}, bytesOf(x)));
  writeBytes(dir + "/labels.npy", npy("<u2", {3}, bytesOf(labels)));
  const auto data = openDataFile(dataAt(dir), 0);
  ASSERT_EQ(data->fields().size(), 2u);
  EXPECT_EQ(data->fields()[0].name, "labels");          // sorted by file name
  EXPECT_EQ(data->fields()[0].sample.dtype, at::kInt);  // uint16 widened
  EXPECT_EQ(data->valueRange(0, -100), std::make_pair(int64_t{1}, int64_t{65535}));
  EXPECT_EQ(data->valueRange(0, 65535), std::make_pair(int64_t{1}, int64_t{2}));  // ignored
  EXPECT_TRUE(at::equal(data->sample(1, 2), at::tensor({4.f, 5.f})));
  EXPECT_EQ(data->sample(0, 0).item<int64_t>(), 65535);
  const DataRoles roles = dataRolesOf(*data, DataConfig{});
  EXPECT_EQ(roles.inputs, std::vector<size_t>{1});
  EXPECT_EQ(roles.target, 0u);
}

TEST(DataFiles, BadNpyFilesAreRefusedWithTheReason) {
  const std::string dir = freshDir("bad_npy");
  const std::string four(16, '\0');
  writeBytes(dir + "/big.npy", npy(">f4", {4}, four));
  writeBytes(dir + "/fortran.npy", npy("<f4", {2, 2}, four, true));
  writeBytes(dir + "/complex.npy", npy("<c8", {2}, four));
  writeBytes(dir + "/magic.npy", "NUMPY? no");
  const auto error = [&](const std::string& name) {
    return test::errorOf([&] { openDataFile(dataAt(dir + "/" + name), 0); });
  };
  EXPECT_NE(error("big.npy").find("has dtype '>f4', which ppstage cannot read"), std::string::npos);
  EXPECT_NE(error("fortran.npy").find("is in Fortran order"), std::string::npos);
  EXPECT_NE(error("complex.npy").find("'<c8'"), std::string::npos);
  EXPECT_NE(error("magic.npy").find("does not start with the magic"), std::string::npos)
      << error("magic.npy");
  const std::string differ = freshDir("npy_differ");
  writeBytes(differ + "/a.npy", npy("<f4", {4}, four));
  writeBytes(differ + "/labels.npy", npy("<i8", {2}, four));
  EXPECT_NE(test::errorOf([&] {
              openDataFile(dataAt(differ), 0);
            }).find("first dimensions differ ('a' has 4 samples, 'labels' 2)"),
            std::string::npos);
}

TEST(DataFiles, TorchSaveDictsKeepTheirOrder) {
  const std::string path = freshDir("tensors") + "/data.pt";
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("input_ids", at::arange(12).reshape({3, 4}));
  dict.insert("labels", at::tensor({2, 0, 1}, at::kLong));
  const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
  writeBytes(path, std::string(bytes.begin(), bytes.end()));
  EXPECT_EQ(resolveDataFormat(dataAt(path)), DataFormat::kTensors);
  const auto data = openDataFile(dataAt(path), 0);
  EXPECT_EQ(data->fields()[0].name, "input_ids");
  EXPECT_TRUE(at::equal(data->sample(0, 1), at::arange(4, 8)));
  EXPECT_EQ(data->valueRange(1, -100), std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_NE(data->describe().find("3 samples of input_ids int64 [4], labels int64 []"),
            std::string::npos)
      << data->describe();
}

// IDX bytes: magic 00 00 08 <dims>, big-endian sizes, values.
std::string idx(const std::vector<uint32_t>& shape, const std::string& values) {
  std::string out{'\0', '\0', '\x08', static_cast<char>(shape.size())};
  for (uint32_t d : shape) {
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((d >> shift) & 0xff);
  }
  return out + values;
}

void writeGzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(DataFiles, GzippedIdxImagesAndLabelsAsTorchvisionReadsThem) {
  const std::string dir = freshDir("idx");
  std::string pixels(2 * 2 * 3, '\0');
  pixels[3] = static_cast<char>(255);
  writeGzip(dir + "/train-images-idx3-ubyte.gz", idx({2, 2, 3}, pixels));
  writeGzip(dir + "/train-labels-idx1-ubyte.gz", idx({2}, std::string{'\x07', '\x01'}));
  const DataConfig config = dataAt(dir + "/train-images-idx3-ubyte.gz");
  EXPECT_EQ(resolveDataFormat(config), DataFormat::kIdx);
  const auto data = openDataFile(config, 0);
  EXPECT_EQ(data->fields()[0].sample.shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FLOAT_EQ(data->sample(0, 0)[0][1][0].item<float>(), 1.0f);
  EXPECT_EQ(data->sample(1, 0).item<int64_t>(), 7);
  writeBytes(dir + "/wrong-images-idx3-ubyte", "\x00\x00\x0d\x03");
  DataConfig wrong = dataAt(dir + "/wrong-images-idx3-ubyte");
  wrong.format = DataFormat::kIdx;
  EXPECT_NE(test::errorOf([&] { openDataFile(wrong, 0); }).find("IDX magic number"),
            std::string::npos);
}

TEST(DataRoles, TheTargetIsNamedAndTheOtherFieldsAreOnOffer) {
  const std::string dir = freshDir("roles");
  const std::string four(16, '\0');
  writeBytes(dir + "/a.npy", npy("<f4", {4}, four));
  writeBytes(dir + "/b.npy", npy("<f4", {4}, four));
  const auto data = openDataFile(dataAt(dir), 0);
  EXPECT_NE(test::errorOf([&] { dataRolesOf(*data, DataConfig{}); }).find("and no target"),
            std::string::npos);
  DataConfig named;
  named.target = "a";
  EXPECT_EQ(dataRolesOf(*data, named).offered_fields, std::vector<size_t>{1});
  // --train.loss model: the labels go to forward too.
  EXPECT_EQ(dataRolesOf(*data, named, /*offers_target=*/true).offered_fields,
            (std::vector<size_t>{0, 1}));
  writeBytes(dir + "/c.npy", npy("<f4", {4}, four));
  const auto three = openDataFile(dataAt(dir), 0);
  EXPECT_EQ(dataRolesOf(*three, named).offered_fields, (std::vector<size_t>{1, 2}));
  named.target = "d";
  EXPECT_NE(test::errorOf([&] { dataRolesOf(*data, named); }).find("--data.target 'd' is not"),
            std::string::npos);
}

TEST(Loss, CrossEntropyIsASumOverCountedLabels) {
  const at::Tensor logits = at::randn({5, 3});
  const at::Tensor labels = at::tensor({0, -100, 2, 1, -100}, at::kLong);
  const LossTerms terms = lossTerms(LossKind::kCrossEntropy, logits, labels, -100);
  const at::Tensor kept = at::tensor({0, 2, 3}, at::kLong);
  const at::Tensor expected =
      at::cross_entropy_loss(logits.index_select(0, kept), labels.index_select(0, kept)) * 3;
  EXPECT_TRUE(at::allclose(terms.sum, expected));
  EXPECT_EQ(countTargets(LossKind::kCrossEntropy, labels, -100), 3);
  const int64_t right =
      logits.argmax(1).index_select(0, kept).eq(labels.index_select(0, kept)).sum().item<int64_t>();
  EXPECT_EQ(terms.correct.item<int64_t>(), right);
  EXPECT_NE(
      test::errorOf([&] {
        lossTerms(LossKind::kCrossEntropy, logits, at::tensor({0, 3, 0, 0, 0}, at::kLong), -100);
      }).find("a label is 3 but the model's output has 3 classes"),
      std::string::npos);
  EXPECT_EQ(resolveLossKind(std::nullopt, at::kByte), LossKind::kCrossEntropy);
}

TEST(LrSchedule, WarmUpThenDecayToMinLrAtTheLastStep) {
  TrainConfig t;
  t.steps = 11;
  t.lr = 1.0;
  t.min_lr = 0.1;
  t.warmup_steps = 2;
  t.lr_schedule = LrSchedule::kCosine;
  EXPECT_DOUBLE_EQ(learningRate(t, 0), 0.5);
  EXPECT_DOUBLE_EQ(learningRate(t, 1), 1.0);
  EXPECT_DOUBLE_EQ(learningRate(t, 2), 1.0);  // p = 0
  EXPECT_NEAR(learningRate(t, 6), 0.1 + 0.9 * (1 + std::cos(M_PI * 4 / 8)) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(learningRate(t, 10), 0.1);
  t.lr_schedule = LrSchedule::kLinear;
  EXPECT_DOUBLE_EQ(learningRate(t, 6), 1.0 - 0.9 * 0.5);
  t.lr_schedule = LrSchedule::kConstant;
  EXPECT_DOUBLE_EQ(learningRate(t, 10), 1.0);
}

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

// A text shipped gzipped (jargon.txt.gz) is trained on as its text, not as compressed
// bytes, as gzipped IDX files are.
TEST(Data, AGzippedTextIsReadAsItsText) {
  const std::string text(4000, 'a');
  const std::string path = testing::TempDir() + "ppstage_text.txt.gz";
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(file);
  DataConfig config;
  config.path = path;
  const auto data = openDataset(config, tokenRequest(64, 256));
  EXPECT_EQ(data->size(), static_cast<int64_t>((text.size() - 1) / 64));
  EXPECT_EQ(data->sample(0, 0)[0].item<int64_t>(), 'a');
  EXPECT_NE(data->describe().find("(gunzipped)"), std::string::npos) << data->describe();
  std::remove(path.c_str());
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

}  // namespace
}  // namespace ppstage

namespace ppstage {
namespace {

TEST(SampleOrder, LargeDataSetsArePermutedWithoutATable) {
  const int64_t n = SampleOrder::kShuffledInMemory + 12345;
  const SampleOrder order(n, 7), again(n, 7);
  const std::vector<int64_t> epoch0 = order.samples(0, n);
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t i : epoch0) {
    ASSERT_TRUE(i >= 0 && i < n);
    ASSERT_FALSE(seen[static_cast<size_t>(i)]) << i << " twice in one epoch";
    seen[static_cast<size_t>(i)] = true;
  }
  EXPECT_EQ(again.samples(1000, 64),
            std::vector<int64_t>(epoch0.begin() + 1000, epoch0.begin() + 1064));
  EXPECT_NE(order.samples(n, 64), std::vector<int64_t>(epoch0.begin(), epoch0.begin() + 64));
  int64_t in_place = 0;  // a shuffle, not the identity
  for (int64_t i = 0; i < 1000; ++i) in_place += epoch0[static_cast<size_t>(i)] == i;
  EXPECT_LT(in_place, 10);
}

}  // namespace
}  // namespace ppstage
