// Micro-batches of different lengths (--data.seq_len_policy): documents from text and token
// files, how a step's documents are ordered and padded, boundary shapes that follow the
// sequence length, and whole pipelined runs against one process with one micro-batch.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "ppstage/comm/boundary_spec.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/data/data_files.h"
#include "ppstage/data/dataset.h"
#include "ppstage/data/sequence_batches.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/models/script_module_builder.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/split/model_split.h"
#include "ppstage/train/trainer.h"
#include "support/error_of.h"
#include "support/local_ranks.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

DataRequest byteRequest(int64_t seq_len) {
  DataRequest r;
  r.input = {at::kLong, {seq_len}, 256};
  r.output = {at::kFloat, {seq_len, 256}, 0};
  r.loss = LossKind::kCrossEntropy;
  return r;
}

at::Tensor bytes(const std::string& text) {
  std::vector<int64_t> ids(text.begin(), text.end());
  return at::tensor(ids, at::kLong);
}

// Paragraphs are blocks between blank lines (spaces count as blank); each keeps its last
// newline, is cut at seq_len + 1 bytes, and gives seq_len - 1 inputs and next-byte targets
// of its own; a one-byte paragraph has no target and is left out.
TEST(Documents, TextParagraphsAreSamplesOfTheirOwnLength) {
  const std::string path = testing::TempDir() + "ppstage_paragraphs.txt";
  std::ofstream(path) << "ab\ncd\n\n  \nefghijklmnop\n\nx";
  DataConfig config;
  config.path = path;
  config.documents = true;
  const auto data = openDataset(config, byteRequest(8));
  ASSERT_EQ(data->size(), 2);
  EXPECT_EQ(data->length(0), 5);  // "ab\ncd\n": 6 bytes
  EXPECT_TRUE(at::equal(data->sample(0, 0), bytes("ab\ncd")));
  EXPECT_TRUE(at::equal(data->sample(1, 0), bytes("b\ncd\n")));
  EXPECT_EQ(data->length(1), 8);  // "efghijklmnop\n" cut at 9 bytes
  EXPECT_TRUE(at::equal(data->sample(1, 1), bytes("fghijklm")));
  EXPECT_NE(data->describe().find("2 documents of 5 to 8 tokens"), std::string::npos);
  std::remove(path.c_str());
}

// A token file's documents run to and include each end-of-text token.
TEST(Documents, TokenFileDocumentsEndAtEachEot) {
  const std::string path = testing::TempDir() + "ppstage_documents.bin";
  const std::vector<uint16_t> tokens = {5, 6, 7, 0, 8, 9, 0, 0, 10, 11, 12};
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), 2 * tokens.size());
  DataConfig config;
  config.path = path;
  config.seq_len_policy = SeqLenPolicy::kVariable;
  config.eot = 0;
  const auto data = openDataFile(config, 16);
  ASSERT_EQ(data->size(), 3);  // [5 6 7 0], [8 9 0], [10 11 12]; [0] alone has no target
  EXPECT_TRUE(at::equal(data->sample(0, 0), at::tensor({5, 6, 7}, at::kLong)));
  EXPECT_TRUE(at::equal(data->sample(1, 0), at::tensor({6, 7, 0}, at::kLong)));
  EXPECT_EQ(data->length(1), 2);
  EXPECT_TRUE(at::equal(data->sample(1, 2), at::tensor({11, 12}, at::kLong)));
  std::remove(path.c_str());
}

// Longest first (within each replica's share), ties in sample order; each policy's padded
// length.
TEST(SequenceBatches, StepsAreOrderedByLengthAndPaddedByPolicy) {
  const std::vector<int64_t> lengths = {3, 9, 5, 9, 1, 16};
  const SequenceBatches variable(SeqLenPolicy::kVariable, {}, 16, lengths);
  const std::vector<int64_t> step = variable.arrange({0, 1, 2, 3, 4});
  EXPECT_EQ(step, (std::vector<int64_t>{1, 3, 2, 0, 4}));
  EXPECT_EQ(variable.arrange({0, 1, 2, 3}, 2), (std::vector<int64_t>{1, 0, 3, 2}));  // replicas
  EXPECT_EQ(variable.paddedLength(step, 0, 2), 9);
  EXPECT_EQ(variable.paddedLength(step, 2, 2), 5);
  EXPECT_EQ(variable.paddedLength(step, 4, 1), 1);
  const SequenceBatches bucket(SeqLenPolicy::kBucket, {}, 16, lengths);
  EXPECT_EQ(bucket.buckets(), (std::vector<int64_t>{4, 8, 16}));
  EXPECT_EQ(bucket.paddedLength(step, 0, 2), 16);
  EXPECT_EQ(bucket.paddedLength(step, 2, 2), 8);
  EXPECT_EQ(bucket.paddedLength(step, 3, 2), 4);
  const SequenceBatches listed(SeqLenPolicy::kBucket, {2, 6}, 16, lengths);
  EXPECT_EQ(listed.buckets(), (std::vector<int64_t>{2, 6, 16}));
  EXPECT_NE(test::errorOf([&] {
              SequenceBatches(SeqLenPolicy::kBucket, {8, 32}, 16, lengths);
            }).find("--data.buckets go up to the sequence length (16); got 32"),
            std::string::npos);
  const SequenceBatches fixed(SeqLenPolicy::kFixed, {}, 16, lengths);
  EXPECT_EQ(fixed.arrange({0, 1, 2}), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(fixed.paddedLength(step, 3, 2), 16);
  EXPECT_FALSE(fixed.varies());
}

TEST(SequenceBatches, PaddingFillsEachSampleToTheLength) {
  const std::string path = testing::TempDir() + "ppstage_pad.txt";
  std::ofstream(path) << "abcd\n\nxy\n";
  DataConfig config;
  config.path = path;
  config.documents = true;
  const auto data = openDataset(config, byteRequest(8));
  const at::Tensor targets = padField(*data, 1, {1, 0}, 6, -100);
  EXPECT_TRUE(at::equal(
      targets,
      at::tensor({'y', '\n', -100, -100, -100, -100, 'b', 'c', 'd', '\n', -100, -100}, at::kLong)
          .view({2, 6})));
  std::remove(path.c_str());
}

TEST(BoundarySpec, DimsThatFollowTheLengthSerializeLosslessly) {
  BoundarySpec s;
  s.stage = 2;
  s.tensors.push_back({"x", at::kFloat, {{1, 0}, {0, 0, 1}, {0, 64}}, true});
  s.tensors.push_back({"flat", at::kFloat, {{0, 0, 0, 1}, {0, 96}}, true});
  s.tensors.push_back({"odd", at::kLong, {{2, -1, -3, 4}}, false});
  EXPECT_EQ(BoundarySpec::deserialize(s.serialize()), s);
  EXPECT_EQ(s.tensors[0].describe(), "x [b, L, 64] Float grad");
  EXPECT_EQ(s.tensors[1].describe(), "flat [bL, 96] Float grad");
  EXPECT_EQ(s.tensors[2].describe(), "odd [2b+4bL-3L-1] Long");
  EXPECT_EQ(s.tensors[0].sizes(3, 10), (std::vector<int64_t>{3, 10, 64}));
  EXPECT_EQ(s.tensors[1].sizes(3, 10), (std::vector<int64_t>{30, 96}));
  EXPECT_TRUE(s.tensors[1].followsLength());
  EXPECT_EQ(allocateReceiveBuffers(s, 2, 5)[1].sizes(), (std::vector<int64_t>{10, 96}));
  EXPECT_THROW(BoundarySpec::deserialize("ppstage-boundary 2 1 1\nx\tFloat\t0\t1\tq\n"), Error);
}

Config documentRun(SeqLenPolicy policy) {
  Config config = test::builtinConfig("gpt", 4);
  config.model.vocab_size = 256;
  config.model.seq_len = 32;
  config.data.seq_len_policy = policy;
  config.train.steps = 3;
  config.train.batch_size = 8;
  config.train.threads = 1;
  config.train.optimizer = OptimizerKind::kSgd;
  config.train.lr = 0.1;
  config.output.log_every = 0;
  return config;
}

// The splitter's probe at half the length: a block's output is (b, L, d_model).
TEST(SequenceShapes, CutsRecordHowTheyFollowTheLength) {
  Config config = documentRun(SeqLenPolicy::kVariable);
  config.pipeline.stages = 2;
  const ModelSplit split = splitModel(config);
  const TensorMeta& meta = split.stages.at(1).inputs.at(0).meta;
  EXPECT_EQ(meta.sizes, (std::vector<int64_t>{8, 32, 32}));
  EXPECT_TRUE(meta.follows_length);
  EXPECT_EQ(meta.dims, (std::vector<AffineDim>{{1, 0}, {0, 0, 1}, {0, 32}}));
  config.data.seq_len_policy = SeqLenPolicy::kFixed;
  const TensorMeta fixed = splitModel(config).stages.at(1).inputs.at(0).meta;
  EXPECT_FALSE(fixed.follows_length);
  EXPECT_EQ(fixed.dims, (std::vector<AffineDim>{{1, 0}, {0, 32}, {0, 32}}));
}

// Each dim of a (b, L, L) value follows the length; a flattened (b, L * L) one does not
// (the probe at a quarter of the length falls off the line through the other two), so its
// dims hold at the example's length only and a cut through it is refused.
TEST(SequenceShapes, AShapeNotAffineInTheLengthIsFound) {
  ScriptModuleBuilder builder;
  const torch::jit::Module module = builder.make(
      "Squares", [](torch::jit::Module&) {}, R"(
def forward(self, x):
    h = x.float()
    pairs = h.unsqueeze(2) * h.unsqueeze(1)
    flat = pairs.reshape(x.size(0), -1)
    return flat.sum(1) + pairs.sum(2).sum(1)
)");
  const auto make_input = [](int64_t batch) {
    return std::vector<at::Tensor>{at::ones({batch, 16}, at::kLong)};
  };
  const ModelGraph graph = captureModel(module, {}, make_input(2));
  ValueShapes shapes = recordValueShapes(graph, make_input, 4);
  recordLengthGrowth(graph, make_input, 4, 8, shapes);
  int affine_squares = 0, flattened = 0;
  for (const auto& [value, meta] : shapes) {
    if (meta.sizes == std::vector<int64_t>{4, 16, 16}) {
      EXPECT_TRUE(meta.follows_length);
      EXPECT_EQ(meta.dims, (std::vector<AffineDim>{{1, 0}, {0, 0, 1}, {0, 0, 1}}));
      ++affine_squares;
    }
    if (meta.sizes == std::vector<int64_t>{4, 256}) {
      EXPECT_FALSE(meta.follows_length);
      EXPECT_EQ(meta.dims, (std::vector<AffineDim>{{1, 0}, {0, 256}}));
      ++flattened;
    }
  }
  EXPECT_EQ(affine_squares, 1);
  EXPECT_EQ(flattened, 1);
}

RunMetrics trainMetrics(const Config& config, int ranks) {
  RunMetrics out;
  test::runRanks(ranks, [&](int rank, Communicator& comm) {
    std::ostringstream log;
    const RunMetrics metrics = train(config, comm, log);
    if (rank == 0) out = metrics;
  });
  return out;
}

// Padding is masked: micro-batches of their own lengths on 2 ranks give the losses of one
// process padding the whole batch to its longest (variable) or its bucket; the receive
// buffers are the pools a run of fixed length allocates, none afresh for a new length; the
// step counts real tokens only.
TEST(SequenceRuns, PipelinedMicroBatchesOfTheirOwnLengthMatchOneProcess) {
  for (const SeqLenPolicy policy : {SeqLenPolicy::kVariable, SeqLenPolicy::kBucket}) {
    Config reference = documentRun(policy);
    reference.pipeline.stages = 1;
    reference.pipeline.microbatches = 1;
    const RunMetrics expected = trainMetrics(reference, 1);
    Config pipelined = documentRun(policy);
    pipelined.pipeline.schedule = "zb-h1";
    pipelined.pipeline.microbatches = 4;
    pipelined.compile.mode = CompileMode::kStage;
    const RunMetrics got = trainMetrics(pipelined, 2);
    ASSERT_EQ(got.losses.size(), expected.losses.size());
    for (size_t i = 0; i < got.losses.size(); ++i) {
      EXPECT_NEAR(got.losses[i], expected.losses[i], 1e-5 * std::abs(expected.losses[i]))
          << toString(policy) << " step " << i;
    }
    EXPECT_EQ(got.step_tokens, expected.step_tokens);
    EXPECT_LT(got.tokens_per_step, got.padded_tokens_per_step);
    EXPECT_LE(got.padded_tokens_per_step, expected.padded_tokens_per_step);
    Config padded = pipelined;  // every micro-batch of --model.seq_len
    padded.data.seq_len_policy = SeqLenPolicy::kFixed;
    padded.data.documents = true;
    const RunMetrics fixed = trainMetrics(padded, 2);
    ASSERT_EQ(fixed.ranks.size(), got.ranks.size());
    for (size_t r = 0; r < got.ranks.size(); ++r) {
      EXPECT_EQ(got.ranks[r].receive_buffers, fixed.ranks[r].receive_buffers) << "rank " << r;
    }
    if (policy == SeqLenPolicy::kBucket) {
      EXPECT_LE(got.compile.specializations_per_graph, 3);  // buckets 8, 16, 32
    }
  }
}

// A token file's documents: the model is captured on its first documents, padded to the
// sequence length, and trains pipelined as one process does.
TEST(SequenceRuns, TokenFileDocumentsTrainAsOneProcess) {
  const std::string path = testing::TempDir() + "ppstage_sequence_tokens.bin";
  std::vector<uint16_t> tokens;
  for (int d = 0; d < 64; ++d) {
    for (int t = 0; t < 3 + (d * 7) % 40; ++t)
      tokens.push_back(static_cast<uint16_t>(1 + (d + t) % 200));
    tokens.push_back(0);
  }
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), 2 * tokens.size());
  Config reference = documentRun(SeqLenPolicy::kVariable);
  reference.data.path = path;
  reference.data.eot = 0;
  Config pipelined = reference;
  reference.pipeline.stages = 1;
  reference.pipeline.microbatches = 1;
  pipelined.pipeline.microbatches = 4;
  const RunMetrics expected = trainMetrics(reference, 1);
  const RunMetrics got = trainMetrics(pipelined, 2);
  ASSERT_EQ(got.losses.size(), expected.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], expected.losses[i], 1e-5 * std::abs(expected.losses[i])) << i;
  }
  EXPECT_NE(got.data.find("64 documents of 3 to 32 tokens"), std::string::npos) << got.data;
  std::remove(path.c_str());
}

// Both ranks must agree on every micro-batch's length; when they do not (here: one pads
// to buckets, the other to the longest document), the receiver refuses the message,
// naming both shapes, instead of reading a truncated tensor.
TEST(SequenceRuns, AReceivedShapeTheStepDoesNotExpectIsAnError) {
  std::mutex mutex;
  std::string rank1_error;
  EXPECT_ANY_THROW(test::runRanks(2, [&](int rank, Communicator& comm) {
    Config config = documentRun(rank == 0 ? SeqLenPolicy::kBucket : SeqLenPolicy::kVariable);
    config.train.steps = 1;
    std::ostringstream log;
    try {
      train(config, comm, log);
    } catch (const std::exception& e) {
      if (rank == 1) {
        std::lock_guard<std::mutex> lock(mutex);
        rank1_error = e.what();
      }
      comm.abort(2);
      throw;
    }
  }));
  EXPECT_NE(rank1_error.find("activation 'layers."), std::string::npos) << rank1_error;
  EXPECT_NE(rank1_error.find("but the step expects [2, "), std::string::npos) << rank1_error;
}

}  // namespace
}  // namespace ppstage
