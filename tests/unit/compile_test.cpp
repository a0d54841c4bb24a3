// Compile modes against the uncompiled stage: `stage` and `block` compute what `none` does
// (outputs and gradients), and block mode's cache compiles one graph per distinct block.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/compile/segments.h"
#include "ppstage/core/error.h"
#include "ppstage/models/model_source.h"
#include "ppstage/models/script_module_builder.h"
#include "ppstage/split/stage_module.h"
#include "support/split_model.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

using test::SplitModel;

SplitModel oneStage(LoadedModel model, int64_t batch) {
  return test::splitModel(std::move(model), 1, batch);
}

// Output sum and every parameter's gradient, after `runs` forward passes (profiling
// executors optimize after their first run).
std::vector<at::Tensor> forwardBackward(CompiledStage& compiled, const StageModule& stage,
                                        const at::Tensor& input, int runs) {
  std::vector<at::Tensor> result;
  for (int r = 0; r < runs; ++r) {
    std::vector<at::Tensor> params;
    for (const StageParameter& p : stage.parameters) {
      if (p.value.requires_grad()) params.push_back(p.value);
    }
    const at::Tensor out = compiled.run(stage.arguments({input})).at(0).toTensor();
    const at::Tensor loss = (out * out).sum();
    result = torch::autograd::grad({loss}, params);
    result.push_back(loss.detach());
  }
  return result;
}

void expectSame(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& expected,
                const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(test::maxRelDiff(got[i], expected[i]), 1e-5) << what << " tensor " << i;
  }
}

CompileStats blockStats(int64_t layers) {
  Config config = test::builtinConfig("gpt", layers, /*tie_embeddings=*/true);
  SplitModel s = oneStage(loadModel(config.model, config.train), 2);
  const StageModule& stage = s.stages[0];
  const at::Tensor input = makeExampleInput(s.model.input, 2, 1);
  CompileCache none_cache(CompileMode::kNone), block_cache(CompileMode::kBlock);
  CompiledStage none(stage.graph, stage.inputs.size(), none_cache, "none");
  CompiledStage block(
      stage.graph, stage.inputs.size(), block_cache, "block",
      segmentStage(*stage.graph, stage.node_call, s.graph, findBlocks(s.graph, "")));
  expectSame(forwardBackward(block, stage, input, 3), forwardBackward(none, stage, input, 1),
             "gpt block mode, " + std::to_string(layers) + " layers");
  return block_cache.stats();
}

// Stage mode: one executor over the whole stage graph, whose outputs and gradients after
// the profiling runs are none's.
TEST(StageCompile, OneGraphComputesWhatNoneDoes) {
  Config config = test::builtinConfig("gpt", 4, /*tie_embeddings=*/true);
  SplitModel s = oneStage(loadModel(config.model, config.train), 2);
  const StageModule& stage = s.stages[0];
  const at::Tensor input = makeExampleInput(s.model.input, 2, 1);
  CompileCache none_cache(CompileMode::kNone), stage_cache(CompileMode::kStage);
  CompiledStage none(stage.graph, stage.inputs.size(), none_cache, "none");
  CompiledStage whole(stage.graph, stage.inputs.size(), stage_cache, "stage");
  expectSame(forwardBackward(whole, stage, input, 3), forwardBackward(none, stage, input, 1),
             "gpt stage mode");
  EXPECT_EQ(stage_cache.stats().graphs_compiled, 1);
  EXPECT_EQ(stage_cache.stats().cache_hits, 0);
  EXPECT_EQ(none_cache.stats().graphs_compiled, 0);
}

TEST(BlockCompile, IdenticalBlocksCompileOnceWhateverTheDepth) {
  const CompileStats eight = blockStats(8);
  const CompileStats sixteen = blockStats(16);
  // Embedding segment, the decoder block, the head segment: 3, at any depth.
  EXPECT_EQ(eight.graphs_compiled, 3);
  EXPECT_EQ(sixteen.graphs_compiled, eight.graphs_compiled);
  EXPECT_EQ(eight.cache_hits, 7);
  EXPECT_EQ(sixteen.cache_hits, 15);
  EXPECT_EQ(eight.respecializations, 0);
}

TEST(BlockCompile, TwoBlockTypesCompileTwoGraphs) {
  ScriptModuleBuilder builder;
  at::manual_seed(3);
  auto block = [&](const std::string& type, const std::string& activation) {
    return builder.make(
        type,
        [&](torch::jit::Module& m) {
          m.register_parameter("weight", at::randn({8, 8}) * 0.3, false);
          m.register_parameter("bias", at::randn({8}) * 0.1, false);
        },
        "\ndef forward(self, x):\n    return x + torch." + activation +
            "(torch.linear(x, self.weight, self.bias))\n");
  };
  auto top = builder.make(
      "TwoKinds",
      [&](torch::jit::Module& m) {
        for (const char* name : {"a0", "a1", "a2"})
          m.register_module(name, block("ReluBlock", "relu"));
        for (const char* name : {"b0", "b1"}) m.register_module(name, block("TanhBlock", "tanh"));
      },
      R"(
def forward(self, x):
    x = self.a2.forward(self.a1.forward(self.a0.forward(x)))
    return self.b1.forward(self.b0.forward(x))
)");
  SplitModel s = oneStage({top, "two_kinds", InputSpec{at::kFloat, {4, 8}, 0}}, 4);
  const StageModule& stage = s.stages[0];
  const std::vector<GraphSegment> segments =
      segmentStage(*stage.graph, stage.node_call, s.graph, findBlocks(s.graph, ""));
  ASSERT_EQ(segments.size(), 5u);
  EXPECT_EQ(segments[0].block, "a0");
  EXPECT_EQ(segments[4].block, "b1");
  EXPECT_EQ(segments[0].structure, segments[2].structure);
  EXPECT_NE(segments[0].structure, segments[3].structure);

  CompileCache none_cache(CompileMode::kNone);
  CompileCache block_cache(
      CompileCacheOptions{CompileMode::kBlock, /*rank=*/0, /*max_respecializations=*/1});
  CompiledStage none(stage.graph, stage.inputs.size(), none_cache, "none");
  CompiledStage compiled(stage.graph, stage.inputs.size(), block_cache, "block", segments);
  // As a received activation: requiring grad, like every block's input after the first.
  const at::Tensor input = makeExampleInput(s.model.input, 4, 2).requires_grad_(true);
  expectSame(forwardBackward(compiled, stage, input, 3), forwardBackward(none, stage, input, 1),
             "two block types");
  EXPECT_EQ(block_cache.stats().graphs_compiled, 2);
  EXPECT_EQ(block_cache.stats().cache_hits, 3);

  // A new batch size with static shapes: the first block of each type is compiled again
  // (a re-specialization each), the others share those; past the bound of 1 the rank
  // warns, once. Back to the old size: every block finds its executor again.
  const at::Tensor wider = makeExampleInput(s.model.input, 6, 2).requires_grad_(true);
  testing::internal::CaptureStderr();
  expectSame(forwardBackward(compiled, stage, wider, 2), forwardBackward(none, stage, wider, 1),
             "two block types, new batch size");
  forwardBackward(compiled, stage, input, 1);
  const std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_EQ(block_cache.stats().graphs_compiled, 4);
  EXPECT_EQ(block_cache.stats().respecializations, 2);
  EXPECT_NE(warning.find("ppstage: warning: [rank 0] 2 re-specializations"), std::string::npos)
      << warning;
  EXPECT_EQ(warning.find("warning", warning.find("warning") + 1), std::string::npos) << warning;

  // Dynamic shapes: one executor per block type takes every batch size.
  setShapeStrategy(true);
  CompileCache dynamic_cache(
      CompileCacheOptions{CompileMode::kBlock, 0, 1, /*dynamic_shapes=*/true});
  CompiledStage dynamic(stage.graph, stage.inputs.size(), dynamic_cache, "dynamic", segments);
  forwardBackward(dynamic, stage, input, 3);
  expectSame(forwardBackward(dynamic, stage, wider, 2), forwardBackward(none, stage, wider, 1),
             "dynamic shapes, new batch size");
  setShapeStrategy(false);  // process-wide: back to the default for the other tests
  EXPECT_EQ(dynamic_cache.stats().graphs_compiled, 2);
  EXPECT_EQ(dynamic_cache.stats().respecializations, 0);

  // The optimized graphs: autodiff subgraphs, and no fusion on a CPU without LLVM.
  block_cache.countOptimizedGraphs();
  EXPECT_GT(block_cache.stats().differentiable_graphs, 0);
}

TEST(BlockCompile, APatternChoosesTheBlocks) {
  Config config = test::builtinConfig("gpt", 4, true);
  SplitModel s = oneStage(loadModel(config.model, config.train), 2);
  const std::vector<bool> blocks = findBlocks(s.graph, "layers\\.[0-9]+\\.mlp");
  int chosen = 0;
  for (size_t c = 0; c < blocks.size(); ++c) {
    if (!blocks[c]) continue;
    ++chosen;
    EXPECT_NE(s.graph.calls[c].path.find(".mlp"), std::string::npos) << s.graph.calls[c].path;
  }
  EXPECT_EQ(chosen, 4);
  EXPECT_THROW(findBlocks(s.graph, "layers.(["), Error);
}

}  // namespace
}  // namespace ppstage
