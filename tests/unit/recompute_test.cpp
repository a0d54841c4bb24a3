// Activation recomputation (compile/recompute.h) against the same stage without it: with
// dropout 0.1 drawn from the same random stream, the outputs, input gradients and weight
// gradients are bitwise equal in compile mode none and within 1e-6 relative in stage and
// block, for full and selective recomputation; an I/W split over recomputed blocks equals
// one backward and runs each block's forward again once, not twice; the rerun graph takes
// an input per reader, last reader first; an input changed in place before the rerun
// stops the backward; and the options' bad values fail with one line.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/ir/irparser.h>

#include "ppstage/compile/model_compiler.h"
#include "ppstage/compile/recompute.h"
#include "ppstage/compile/segments.h"
#include "ppstage/compile/split_backward.h"
#include "ppstage/core/error.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/random_stream.h"
#include "ppstage/models/model_source.h"
#include "ppstage/models/script_module_builder.h"
#include "ppstage/split/stage_module.h"
#include "support/split_model.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

using test::SplitModel;

// gpt, 4 tied layers with dropout 0.1, cut in two.
SplitModel gptInTwo() {
  Config config = test::builtinConfig("gpt", 4, /*tie_embeddings=*/true);
  config.model.dropout = 0.1;
  return test::splitModel(loadModel(config.model, config.train), 2, 2);
}

struct Run {
  at::Tensor output;
  std::vector<at::Tensor> grads;  // the inputs' that need one, then the weights'
};

// One forward of `stage` on `inputs` under micro-batch 3 of step 1's random stream, then
// B (one backward) or I then W; the output's gradient is fixed.
Run forwardBackward(CompiledStage& compiled, const StageModule& stage,
                    const std::vector<at::Tensor>& inputs, bool split_iw) {
  std::vector<at::Tensor> with_grad;
  for (const at::Tensor& t : inputs) {
    if (t.requires_grad()) with_grad.push_back(t);
  }
  at::Tensor out;
  {
    const RandomStreamScope stream(RandomStream{7, 1, 3});
    out = compiled.run(stage.arguments(inputs)).at(0).toTensor();
  }
  const at::Tensor grad = at::cos(at::arange(out.numel(), out.options()).reshape(out.sizes()));
  const std::vector<at::Tensor> weights = test::trainableWeights(stage);
  Run run{out.detach(), {}};
  if (!split_iw) {
    std::vector<at::Tensor> wrt(with_grad);
    wrt.insert(wrt.end(), weights.begin(), weights.end());
    run.grads = torch::autograd::grad({out}, wrt, {grad}, false, false, /*allow_unused=*/true);
    return run;
  }
  SplitBackward split;
  run.grads = split.inputGradients({out}, {grad}, with_grad, weights);
  const std::vector<at::Tensor> w = split.weightGradients();
  run.grads.insert(run.grads.end(), w.begin(), w.end());
  return run;
}

void expectClose(const Run& got, const Run& expected, bool bitwise, const std::string& what) {
  const auto same = [&](const at::Tensor& a, const at::Tensor& b, const std::string& name) {
    ASSERT_EQ(a.defined(), b.defined()) << what << ": " << name;
    if (!a.defined()) return;
    if (bitwise) {
      EXPECT_TRUE(at::equal(a, b))
          << what << ": " << name << " differs by " << test::maxRelDiff(a, b);
    } else {
      EXPECT_LE(test::maxRelDiff(a, b), 1e-6) << what << ": " << name;
    }
  };
  same(got.output, expected.output, "output");
  ASSERT_EQ(got.grads.size(), expected.grads.size()) << what;
  for (size_t i = 0; i < got.grads.size(); ++i) {
    same(got.grads[i], expected.grads[i], "gradient " + std::to_string(i));
  }
}

// Stage `index` of gptInTwo in `mode`, recomputing every block under `policy`, against the
// same mode without recomputation, by B and by I then W.
void checkStage(int index, CompileMode mode, RecomputePolicy policy) {
  SplitModel s = gptInTwo();
  const StageModule& stage = s.stages[static_cast<size_t>(index)];
  CompileConfig compile;
  compile.mode = mode;
  ModelCompiler plain(compile, s.graph), recomputing(compile, s.graph, 0, policy);
  const auto reference = plain.compile(stage.graph, stage.inputs.size(), stage.node_call, "plain");
  const auto compiled =
      recomputing.compile(stage.graph, stage.inputs.size(), stage.node_call, "recomputed", index);
  const auto plain_cache = plain.takeCache();
  const auto cache = recomputing.takeCache();
  ASSERT_EQ(compiled->recomputedBlocks().size(), 2u);

  std::vector<at::Tensor> inputs{makeExampleInput(s.model.input, 2, 1)};
  if (index == 1) {
    CompileCache none(CompileMode::kNone);
    CompiledStage first(s.stages[0].graph, s.stages[0].inputs.size(), none, "stage 0");
    const RandomStreamScope stream(RandomStream{7, 1, 3});
    inputs = {first.run(s.stages[0].arguments(inputs)).at(0).toTensor().detach().requires_grad_()};
  }
  const std::string what = "stage " + std::to_string(index) + ", compile " + toString(mode) +
                           ", recompute " + toString(policy);
  for (int warm = 0; warm < 3; ++warm) {  // profiling executors optimize after their first runs
    forwardBackward(*reference, stage, inputs, false);
    forwardBackward(*compiled, stage, inputs, false);
  }
  const bool bitwise = mode == CompileMode::kNone;
  const Run expected = forwardBackward(*reference, stage, inputs, false);
  expectClose(forwardBackward(*compiled, stage, inputs, false), expected, bitwise, what + ", B");
  const int64_t before = cache->recomputeStats().reruns;
  expectClose(forwardBackward(*compiled, stage, inputs, true), expected, bitwise, what + ", I+W");
  // Each recomputed segment ran once more for I and W together: W reran nothing.
  int64_t segments = 0;
  for (const std::string& block : compiled->recomputedBlocks()) segments += !block.empty();
  const int64_t reruns = cache->recomputeStats().reruns - before;
  if (policy == RecomputePolicy::kFull) {
    EXPECT_EQ(reruns, segments) << what;
  } else {
    EXPECT_GT(reruns, segments) << what << ": selective reruns a block's pieces";
  }
  EXPECT_GT(cache->recomputeStats().seconds, 0) << what;
}

TEST(Recompute, FullEqualsNoRecomputationInEveryCompileMode) {
  for (CompileMode mode : {CompileMode::kNone, CompileMode::kStage, CompileMode::kBlock}) {
    checkStage(1, mode, RecomputePolicy::kFull);
    checkStage(0, mode, RecomputePolicy::kFull);
  }
}

TEST(Recompute, SelectiveEqualsNoRecomputationInEveryCompileMode) {
  for (CompileMode mode : {CompileMode::kNone, CompileMode::kStage, CompileMode::kBlock}) {
    checkStage(1, mode, RecomputePolicy::kSelective);
    checkStage(0, mode, RecomputePolicy::kSelective);
  }
}

// What --train.recompute_blocks chooses, by pattern, count per stage and every:N.
TEST(Recompute, BlocksChosenByPatternCountAndPeriod) {
  SplitModel s = gptInTwo();
  const auto blocks = [&](const std::string& spec, int stage) {
    ModelCompiler compiler(CompileConfig{}, s.graph, 0, RecomputePolicy::kFull, spec);
    const StageModule& m = s.stages[static_cast<size_t>(stage)];
    return compiler.recomputedBlocks(*m.graph, m.inputs.size(), m.node_call, stage);
  };
  const std::vector<std::string> all0 = blocks("", 0), all1 = blocks("", 1);
  ASSERT_EQ(all0.size(), 2u);
  ASSERT_EQ(all1.size(), 2u);
  EXPECT_EQ(blocks("1", 0), std::vector<std::string>{all0[0]});
  EXPECT_EQ(blocks("1", 1), std::vector<std::string>{all1[0]});
  EXPECT_EQ(blocks("2,0", 0), all0);
  EXPECT_TRUE(blocks("2,0", 1).empty());
  EXPECT_EQ(blocks("2", 1), all1);
  EXPECT_EQ(blocks("every:2", 0), std::vector<std::string>{all0[1]});
  EXPECT_EQ(blocks("every:2", 1), std::vector<std::string>{all1[1]});
  EXPECT_EQ(blocks(all1[1], 1), std::vector<std::string>{all1[1]});
  EXPECT_TRUE(blocks(all1[1], 0).empty());
}

// The rerun graph has one input per reader of each segment input, the last reader first:
// x is read by the return, the add and the mul (twice, one input), w once.
TEST(Recompute, RerunGraphHasAnInputPerReader) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
    graph(%x : Tensor, %w : Tensor):
      %one : int = prim::Constant[value=1]()
      %a : Tensor = aten::mul(%x, %x)
      %b : Tensor = aten::mm(%a, %w)
      %c : Tensor = aten::add(%b, %x, %one)
      return (%c, %x))IR",
                      graph.get());
  const RerunGraph rerun = inputPerReader(*graph);
  EXPECT_EQ(rerun.source, (std::vector<size_t>{0, 0, 0, 1}));
  const torch::jit::Graph& g = *rerun.graph;
  EXPECT_EQ(g.outputs()[1], g.inputs()[0]) << "the return reads x first";
  EXPECT_EQ(g.outputs()[0]->node()->input(1), g.inputs()[1]) << "then the add";
  const torch::jit::Node* mul = g.outputs()[0]->node()->input(0)->node()->input(0)->node();
  EXPECT_EQ(mul->input(0), g.inputs()[2]);
  EXPECT_EQ(mul->input(1), g.inputs()[2]) << "the mul reads x twice through one input";
}

// A kept input changed in place between the forward and the backward: the rerun would
// compute from other values, so the backward stops, naming the block.
TEST(Recompute, AnInputChangedInPlaceStopsTheBackward) {
  const at::Tensor x = at::ones({2, 2}).requires_grad_(true);
  const at::Tensor h = x * 2;  // not a leaf: may change in place
  RecomputeStats stats;
  const RecomputedSegment segment{[](std::vector<c10::IValue> in) {
                                    const at::Tensor t = in[0].toTensor();
                                    return std::vector<c10::IValue>{t * t};
                                  },
                                  {0}};
  const at::Tensor y = runRecomputed({h}, segment, "layers.7", stats, nullptr)[0].toTensor();
  {
    const at::NoGradGuard no_grad;
    h.add_(1);
  }
  try {
    torch::autograd::grad({y.sum()}, {x});
    FAIL() << "a rerun on changed inputs";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("layers.7: input 0 of a recomputed block was changed "
                                         "in place after its forward"),
              std::string::npos)
        << e.what();
  }
}

// Blocks that are one linear layer each: selective keeps all they compute, so no block of
// theirs is listed as recomputed (and none reruns); full recomputes both.
TEST(Recompute, SelectiveListsNoBlockWhoseOpsItAllKeeps) {
  ScriptModuleBuilder builder;
  const auto layer = [&] {
    return builder.make(
        "Lin",
        [](torch::jit::Module& m) {
          m.register_parameter("w", at::ones({4, 4}), false);
        },
        "\ndef forward(self, x):\n    return torch.linear(x, self.w)\n");
  };
  auto top = builder.make(
      "TwoLinears",
      [&](torch::jit::Module& m) {
        m.register_module("a", layer());
        m.register_module("b", layer());
      },
      "\ndef forward(self, x):\n    return self.b.forward(self.a.forward(x))\n");
  test::SplitModel s =
      test::splitModel({top, "two_linears", InputSpec{at::kFloat, {2, 4}, 0}}, 1, 2);
  const StageModule& stage = s.stages[0];
  for (const RecomputePolicy policy : {RecomputePolicy::kFull, RecomputePolicy::kSelective}) {
    const ModelCompiler compiler(CompileConfig{}, s.graph, 0, policy, "");
    const std::vector<std::string> blocks =
        compiler.recomputedBlocks(*stage.graph, stage.inputs.size(), stage.node_call, 0);
    EXPECT_EQ(blocks.size(), policy == RecomputePolicy::kFull ? 2u : 0u) << toString(policy);
  }
}

TEST(Recompute, BadBlocksFailWithOneLine) {
  SplitModel s = gptInTwo();
  const auto error = [&](const std::string& spec) {
    try {
      ModelCompiler compiler(CompileConfig{}, s.graph, 0, RecomputePolicy::kFull, spec);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("nothing\\.here").find("matches no block"), std::string::npos)
      << error("nothing\\.here");
  EXPECT_NE(error("every:0").find("every:N needs a whole N >= 1"), std::string::npos);
  EXPECT_NE(error("(").find("is not a regular expression"), std::string::npos);

  // One linear layer: no module type is called twice.
  ScriptModuleBuilder builder;
  auto layer = builder.make(
      "Layer",
      [](torch::jit::Module& m) {
        m.register_parameter("w", at::ones({4, 4}), false);
      },
      "\ndef forward(self, x):\n    return torch.relu(torch.mm(x, self.w))\n");
  auto top = builder.make(
      "OneLayer", [&](torch::jit::Module& m) { m.register_module("only", layer); },
      "\ndef forward(self, x):\n    return self.only.forward(x)\n");
  const ModelGraph graph = captureModel(top);
  try {
    ModelCompiler compiler(CompileConfig{}, graph, 0, RecomputePolicy::kSelective, "");
    FAIL() << "a one-block mlp has nothing to recompute";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no repeated blocks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ppstage
