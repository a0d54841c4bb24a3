// The tensor-parallel pass (parallel/tensor_parallel.h) against the unsharded stage: ranks
// as threads, each running its shard of the stage in every compile mode, compute the
// unsharded stage's outputs, and each parameter's gradient (a sharded one's shard of it),
// with dropout too. Regions the pass cannot prove stay replicated and say why.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <mutex>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/compile/segments.h"
#include "ppstage/core/topology.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/random_stream.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/models/model_source.h"
#include "ppstage/parallel/tensor_parallel.h"
#include "ppstage/parallel/tp_group.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/split/stage_partition.h"
#include "ppstage/train/gradient_sync.h"
#include "support/local_ranks.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

// The model of `config` as one stage, as `ppstage train` captures and cuts it.
ModelSplit oneStage(Config config) {
  config.pipeline.stages = 1;
  return splitModel(config);
}

// The loss (output squared, summed) and every trainable parameter's gradient, after two
// runs (profiling executors optimize after their first).
std::vector<at::Tensor> lossAndGradients(CompiledStage& compiled, const StageModule& stage,
                                         const at::Tensor& input) {
  std::vector<at::Tensor> result;
  for (int run = 0; run < 2; ++run) {
    RandomStreamScope stream({7, run, 0});
    std::vector<c10::IValue> args{input};
    std::vector<at::Tensor> params;
    for (const StageParameter& p : stage.parameters) {
      args.emplace_back(p.value);
      if (p.value.requires_grad()) params.push_back(p.value);
    }
    const at::Tensor out = compiled.run(args).at(0).toTensor();
    const at::Tensor loss = (out * out).sum();
    result = torch::autograd::grad({loss}, params);
    result.insert(result.begin(), loss.detach());
  }
  return result;
}

std::unique_ptr<CompiledStage> compile(const ModelSplit& s, StageModule& stage,
                                       CompileCache& cache) {
  std::vector<GraphSegment> segments;
  if (cache.mode() == CompileMode::kBlock) {
    segments = segmentStage(*stage.graph, stage.node_call, s.graph, findBlocks(s.graph, ""));
  }
  return std::make_unique<CompiledStage>(stage.graph, stage.inputs.size(), cache, "stage 0",
                                         std::move(segments));
}

// Runs `config`'s model as one stage sharded over `tp` ranks in `mode` and checks the loss
// and every gradient against the unsharded stage's; returns rank 0's report.
TpStageReport expectShardsMatch(const Config& config, int tp, CompileMode mode) {
  ModelSplit reference = oneStage(config);
  // A micro-batch half the plan's batch: what the pass rewrote must not hold the plan's
  // batch (heads merged with the batch, nn.MultiheadAttention's (T, B*H, hd)).
  const at::Tensor input = makeExampleInput(reference.model.input, config.train.batch_size / 2, 3);
  CompileCache none(CompileMode::kNone);
  const std::vector<at::Tensor> expected =
      lossAndGradients(*compile(reference, reference.stages[0], none), reference.stages[0], input);
  // The unsharded stage's graphs in `mode`: block mode compiles one per distinct block, and
  // sharding (identical rewrites of identical blocks) must keep it so.
  ModelSplit unsharded = oneStage(config);
  CompileCache unsharded_cache(mode);
  lossAndGradients(*compile(unsharded, unsharded.stages[0], unsharded_cache), unsharded.stages[0],
                   input);
  std::vector<ModelSplit> ranks;
  for (int r = 0; r < tp; ++r) ranks.push_back(oneStage(config));
  TpStageReport report;
  std::mutex mutex;
  test::runRanks(tp, [&](int rank, Communicator& world) {
    TpGroup group(rank, tp);
    group.attach(world.split(0, rank));
    ModelSplit& mine = ranks[static_cast<size_t>(rank)];
    StageModule& stage = mine.stages[0];
    const TpStageReport shards = shardStage(stage, mine.graph, group);
    CompileCache cache(CompileCacheOptions{mode, rank});
    const std::vector<at::Tensor> got =
        lossAndGradients(*compile(mine, stage, cache), stage, input);
    std::lock_guard<std::mutex> lock(mutex);
    if (rank == 0) report = shards;
    EXPECT_EQ(cache.stats().graphs_compiled, unsharded_cache.stats().graphs_compiled)
        << toString(mode) << ", rank " << rank << " (stats of one graph per distinct block)";
    EXPECT_LE(test::maxRelDiff(got[0], expected[0]), 1e-5) << "loss, rank " << rank;
    size_t g = 1;
    for (const StageParameter& p : stage.parameters) {
      if (!p.value.requires_grad()) continue;
      EXPECT_LE(test::maxRelDiff(got[g], shardOf(expected[g], p.shard)), 1e-4)
          << p.name << " (" << p.shard.describe() << "), rank " << rank << ", " << toString(mode);
      ++g;
    }
  });
  return report;
}

TEST(TensorParallel, GptShardsEveryAttentionAndMlpAndMatchesOneProcess) {
  Config config = test::builtinConfig("gpt", 2);
  for (const CompileMode mode : {CompileMode::kNone, CompileMode::kStage, CompileMode::kBlock}) {
    const TpStageReport report = expectShardsMatch(config, 2, mode);
    for (const std::string& line : describeRegions(report)) std::cout << line << "\n";
    ASSERT_EQ(report.regions.size(), 5u) << toString(mode);
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(report.regions[i].sharded) << report.regions[i].why;
    EXPECT_EQ(report.regions[0].module, "layers.0.attn");
    EXPECT_EQ(report.regions[1].module, "layers.0.mlp");
    // The LM head reads the token embedding's weight: tied, so it stays whole.
    EXPECT_EQ(report.regions[4].module, "lm_head");
    EXPECT_FALSE(report.regions[4].sharded);
    EXPECT_NE(report.regions[4].why.find("'wte.weight' is also read elsewhere"), std::string::npos)
        << report.regions[4].why;
    EXPECT_EQ(report.forward_all_reduces, 4);
    EXPECT_EQ(report.backward_all_reduces, 4);
  }
}

TEST(TensorParallel, GptWithDropoutDrawsOneProcessMasksAtTp4) {
  Config config = test::builtinConfig("gpt", 1);
  config.model.dropout = 0.1;
  expectShardsMatch(config, 4, CompileMode::kStage);
}

// Three heads do not divide by tp 2: each attention stays whole (its output projection is
// not taken for a region of its own), and the MLPs after it are still sharded.
TEST(TensorParallel, AnAttentionThatCannotBeShardedLeavesTheRestSharded) {
  Config config = test::builtinConfig("gpt", 2);
  config.model.d_model = 48;
  config.model.heads = 3;
  const TpStageReport report = expectShardsMatch(config, 2, CompileMode::kStage);
  for (const std::string& line : describeRegions(report)) std::cout << line << "\n";
  ASSERT_EQ(report.regions.size(), 5u);
  for (const int i : {0, 2}) {
    EXPECT_FALSE(report.regions[i].sharded);
    EXPECT_NE(report.regions[i].why.find("heads that do not divide by tp 2"), std::string::npos)
        << report.regions[i].why;
  }
  EXPECT_TRUE(report.regions[1].sharded);
  EXPECT_EQ(report.regions[1].module, "layers.0.mlp");
  EXPECT_TRUE(report.regions[3].sharded);
}

TEST(TensorParallel, TransformerEncoderShardsTheFusedInProjectionByHeads) {
  Config config;
  config.model.name = test::fixturePath("real/transformer_encoder.pt");
  config.model.vocab_size = 64;
  config.model.seq_len = 16;
  config.train.batch_size = 4;
  const TpStageReport report = expectShardsMatch(config, 2, CompileMode::kNone);
  for (const std::string& line : describeRegions(report)) std::cout << line << "\n";
}

// The global gradient norm with tensor parallelism: a tensor held whole on both ranks (its
// gradient large, and equal on both) counts once; each rank's shard counts.
TEST(TensorParallel, GradientNormCountsAWholeTensorOnceAndEveryShard) {
  const at::Tensor whole_grad = at::full({4}, 100.0);
  const at::Tensor sharded_grad = at::arange(8, at::kFloat).reshape({4, 2});  // whole: (4, 2)
  const double expected =
      std::sqrt(whole_grad.pow(2).sum().item<double>() + sharded_grad.pow(2).sum().item<double>());
  test::runRanks(2, [&](int rank, Communicator& world) {
    const Topology topology = Topology::forJob(2, 1, 1, 1, Placement::kLoop, 2).atRank(rank);
    ASSERT_EQ(topology.tpRank(), rank);
    StageModule stage;
    const TensorShard shard{0, 1, rank, 2};
    StageParameter whole{"norm.weight", {}, at::zeros({4}).requires_grad_(), true, {0}, false, {}};
    StageParameter piece{"fc.weight", {},   at::zeros({2, 2}).requires_grad_(), true, {1},
                         false,       shard};
    whole.value.mutable_grad() = whole_grad.clone();
    piece.value.mutable_grad() = shardOf(sharded_grad, shard).clone();
    stage.parameters = {whole, piece};
    GradientSync sync(world, topology, {&stage}, {});
    at::Tensor share = at::tensor({sync.squaredNormShare()}, at::kDouble);
    world.allReduceSum({share});
    EXPECT_NEAR(std::sqrt(share.item<double>()), expected, 1e-9 * expected) << "rank " << rank;
  });
}

}  // namespace
}  // namespace ppstage
