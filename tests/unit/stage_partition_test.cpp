// The splitter's stage partition (split/stage_partition.h) and extraction (split/stage_module.h):
// units, balance, split points and their errors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include "ppstage/core/error.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/graph_runner.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/models/model_source.h"
#include "ppstage/models/script_module_builder.h"
#include "ppstage/split/model_split.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/split/stage_partition.h"
#include "support/error_of.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

struct Captured {
  LoadedModel model;
  ModelGraph graph;
  ValueShapes shapes;
};

Captured capture(const Config& config) {
  Captured c{loadModel(config.model, config.train), {}, {}};
  c.graph = captureModel(c.model.module);
  c.shapes = recordValueShapes(
      c.graph, [&](int64_t b) { return makeExampleInputs(c.model.input, b, 0); }, 2);
  return c;
}

std::vector<std::string> unitPaths(const std::vector<SplitUnit>& units) {
  std::vector<std::string> paths;
  for (const SplitUnit& u : units) paths.push_back(u.path);
  return paths;
}

std::vector<std::vector<std::string>> stageModules(const Captured& c, PipelineConfig pipeline) {
  const StagePartition plan = partitionStages(c.graph, c.shapes, pipeline);
  std::vector<std::vector<std::string>> modules;
  for (const StageRange& r : plan.stages) {
    modules.emplace_back();
    for (size_t u = r.first_unit; u < r.end_unit; ++u) modules.back().push_back(plan.units[u].path);
  }
  return modules;
}

using test::errorOf;

TEST(Units, GptUnitsAreTheCallsOfItsForward) {
  const Captured c = capture(test::builtinConfig("gpt", 3));
  EXPECT_EQ(unitPaths(findUnits(c.graph, c.shapes)),
            (std::vector<std::string>{"wte", "wpe", "layers.0", "layers.1", "layers.2", "ln_f",
                                      "lm_head"}));
}

TEST(Units, WrapperHoldingMostParametersIsExpanded) {
  const Captured c = capture(test::fixtureConfig("hf_gpt2.pt"));
  EXPECT_EQ(unitPaths(findUnits(c.graph, c.shapes)),
            (std::vector<std::string>{"transformer.wte", "transformer.wpe", "transformer.drop",
                                      "transformer.h.0", "transformer.h.1", "transformer.h.2",
                                      "transformer.ln_f", "lm_head"}));
}

TEST(Units, CountParametersAndFlops) {
  const Captured c = capture(test::builtinConfig("mlp", 2));
  const auto units = findUnits(c.graph, c.shapes);
  ASSERT_EQ(unitPaths(units), (std::vector<std::string>{"layers.0", "layers.1", "norm", "head"}));
  const int64_t d = 32, h = 4 * 32;
  EXPECT_EQ(units[0].num_params, 2 * d + (d * h + h) + (h * d + d));
  EXPECT_EQ(units[3].num_params, d * d + d);
  // head: (2, 16, 32) x (32 -> 32) = 2 * 2*16*32 * 32
  EXPECT_DOUBLE_EQ(units[3].flops, 2.0 * 2 * 16 * 32 * 32);
}

TEST(Balance, PartitionMatchesBruteForce) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + rng() % 9, parts = 1 + rng() % n;
    std::vector<double> costs(n);
    for (double& c : costs) c = static_cast<double>(rng() % 20);
    const auto starts = balancedPartition(costs, parts);
    ASSERT_EQ(starts.size(), parts - 1);
    auto worst = [&](const std::vector<size_t>& s) {
      double w = 0, sum = 0;
      size_t next = 0;
      for (size_t i = 0; i < n; ++i) {
        if (next < s.size() && s[next] == i) {
          w = std::max(w, sum), sum = 0, ++next;
        }
        sum += costs[i];
      }
      return std::max(w, sum);
    };
    // Brute force over all sets of parts-1 cut positions in [1, n).
    double best = std::numeric_limits<double>::infinity();
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      if (mask & 1u || static_cast<size_t>(__builtin_popcount(mask)) != parts - 1) continue;
      std::vector<size_t> s;
      for (size_t i = 1; i < n; ++i) {
        if (mask >> i & 1u) s.push_back(i);
      }
      best = std::min(best, worst(s));
    }
    for (size_t i = 0; i < starts.size(); ++i) {
      ASSERT_GT(starts[i], i == 0 ? 0 : starts[i - 1]) << "non-empty parts";
    }
    EXPECT_EQ(worst(starts), best) << "trial " << trial;
  }
}

TEST(SplitPoints, StagesStartAtTheNamedModules) {
  const Captured c = capture(test::builtinConfig("gpt", 4));
  PipelineConfig pipeline;
  pipeline.split_points = {"layers.1", "layers.2"};
  EXPECT_EQ(
      stageModules(c, pipeline),
      (std::vector<std::vector<std::string>>{
          {"wte", "wpe", "layers.0"}, {"layers.1"}, {"layers.2", "layers.3", "ln_f", "lm_head"}}));
}

// A list out of the order the forward runs the modules is a mistake, not a set to sort.
TEST(SplitPoints, PointsOutOfTheModelsOrderAreRefused) {
  const Captured c = capture(test::builtinConfig("gpt", 4));
  PipelineConfig pipeline;
  pipeline.split_points = {"layers.2", "layers.1"};
  EXPECT_NE(errorOf([&] { stageModules(c, pipeline); })
                .find("split points must be listed in the order the model runs them: 'layers.1' "
                      "runs before 'layers.2'"),
            std::string::npos);
}

TEST(SplitPoints, APrefixNamesItsFirstModule) {
  const Captured c = capture(test::builtinConfig("gpt", 2));
  PipelineConfig pipeline;
  pipeline.split_points = {"layers"};
  EXPECT_EQ(stageModules(c, pipeline),
            (std::vector<std::vector<std::string>>{{"wte", "wpe"},
                                                   {"layers.0", "layers.1", "ln_f", "lm_head"}}));
}

TEST(SplitPoints, ADeeperModuleRefinesItsBlock) {
  const Captured c = capture(test::builtinConfig("gpt", 2));
  PipelineConfig pipeline;
  pipeline.split_points = {"layers.1.mlp"};
  const auto modules = stageModules(c, pipeline);
  ASSERT_EQ(modules.size(), 2u);
  EXPECT_EQ(modules[0], (std::vector<std::string>{"wte", "wpe", "layers.0", "layers.1.ln1",
                                                  "layers.1.attn", "layers.1.ln2"}));
  EXPECT_EQ(modules[1], (std::vector<std::string>{"layers.1.mlp", "ln_f", "lm_head"}));
  // Inside a block two tensors cross: the residual stream and the normalized input.
  const StagePartition plan = partitionStages(c.graph, c.shapes, pipeline);
  const auto stages = extractStages(c.graph, plan, c.shapes);
  EXPECT_EQ(stages[1].inputs.size(), 2u);
}

TEST(SplitPoints, ErrorsNameTheProblem) {
  const Captured c = capture(test::builtinConfig("gpt", 2));
  PipelineConfig unknown;
  unknown.split_points = {"layer.1"};
  const std::string listed = errorOf([&] { partitionStages(c.graph, c.shapes, unknown); });
  EXPECT_NE(listed.find("'layer.1'"), std::string::npos) << listed;
  EXPECT_NE(listed.find("wte, wpe, layers.0, layers.1, ln_f, lm_head"), std::string::npos)
      << listed;

  PipelineConfig first;
  first.split_points = {"wte"};
  EXPECT_NE(
      errorOf([&] { partitionStages(c.graph, c.shapes, first); }).find("stage 0 would be empty"),
      std::string::npos);

  PipelineConfig twice;
  twice.split_points = {"layers.1", "layers.1.ln1"};
  EXPECT_NE(
      errorOf([&] { partitionStages(c.graph, c.shapes, twice); }).find("start the same stage"),
      std::string::npos);

  PipelineConfig too_many;
  too_many.stages = 7;
  EXPECT_NE(errorOf([&] {
              partitionStages(c.graph, c.shapes, too_many);
            }).find("only 6 splittable units"),
            std::string::npos);
}

TEST(Extract, SkipConnectionIsForwardedThroughMiddleStages) {
  const Captured c = capture(test::fixtureConfig("unet.pt"));
  PipelineConfig pipeline;
  pipeline.split_points = {"down2", "up2"};
  const auto stages =
      extractStages(c.graph, partitionStages(c.graph, c.shapes, pipeline), c.shapes);
  ASSERT_EQ(stages.size(), 3u);
  // stem's output (the long skip) is made in stage 0 and consumed in stage 2.
  auto carries = [](const std::vector<BoundaryTensor>& ts, const std::string& prefix) {
    for (const auto& t : ts) {
      if (t.name.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  EXPECT_TRUE(carries(stages[0].outputs, "stem/"));
  EXPECT_TRUE(carries(stages[1].inputs, "stem/"));
  EXPECT_TRUE(carries(stages[1].outputs, "stem/")) << "passed through stage 1";
  EXPECT_TRUE(carries(stages[2].inputs, "stem/"));
}

TEST(Extract, SizesCrossAsSmallTensorsNotActivations) {
  const Captured c = capture(test::fixtureConfig("hf_gpt2.pt"));
  PipelineConfig pipeline;
  pipeline.split_points = {"transformer.h.1"};
  const auto stages =
      extractStages(c.graph, partitionStages(c.graph, c.shapes, pipeline), c.shapes);
  int activations = 0, sizes = 0;
  for (const BoundaryTensor& t : stages[1].inputs) {
    (t.metadata ? sizes : activations) += 1;
    if (t.metadata) {
      EXPECT_EQ(t.meta.dtype, at::kLong);
      EXPECT_LE(t.meta.sizes.size(), 1u);
    }
  }
  EXPECT_EQ(activations, 1) << "only the hidden state crosses as an activation";
  EXPECT_GE(sizes, 1) << "output_shape is rebuilt from sizes read in stage 0";
}

TEST(Extract, RejectsAValueThatDependsOnTensorData) {
  const Captured c = capture(test::fixtureConfig("data_dependent.pt"));
  PipelineConfig pipeline;
  pipeline.split_points = {"second"};
  const std::string error = errorOf(
      [&] { extractStages(c.graph, partitionStages(c.graph, c.shapes, pipeline), c.shapes); });
  EXPECT_NE(error.find("depends on tensor data"), std::string::npos) << error;
  EXPECT_NE(error.find("stage 1"), std::string::npos) << error;
}

}  // namespace
}  // namespace ppstage

namespace ppstage {
namespace {

// The training flags a captured graph passes to dropout and batch norm: constants.
std::vector<bool> trainingFlags(const ModelGraph& graph) {
  std::vector<bool> flags;
  std::function<void(torch::jit::Block*)> visit = [&](torch::jit::Block* block) {
    for (torch::jit::Node* node : block->nodes()) {
      for (torch::jit::Block* sub : node->blocks()) visit(sub);
      const std::string kind = node->kind().toQualString();
      const int train = kind == "aten::dropout" ? 2 : kind == "aten::batch_norm" ? 5 : -1;
      if (train < 0) continue;
      const auto flag = torch::jit::constant_as<bool>(node->input(static_cast<size_t>(train)));
      EXPECT_TRUE(flag.has_value()) << kind << " with a training flag that is not a constant";
      flags.push_back(flag.value_or(true));
    }
  };
  visit(graph.graph->block());
  return flags;
}

TEST(EvalMode, CapturedInEvalModeNoDropoutAndBatchNormOnRunningStatistics) {
  Config config;
  config.model.name = test::fixturePath("real/densenet.pt");  // BatchNorm and dropout
  config.model.input_dtype = InputDtype::kFloat32;
  config.model.input_shape = {4, 3, 32, 32};
  config.train.batch_size = 4;
  const ModelSplit train = splitModel(config);
  const std::vector<bool> training = trainingFlags(train.graph);
  const CapturedModel eval_model = evalCaptureOf(train, config, nullptr);
  const std::vector<bool> eval = trainingFlags(eval_model.graph);
  ASSERT_FALSE(training.empty());
  EXPECT_EQ(std::count(training.begin(), training.end(), true), static_cast<long>(training.size()));
  EXPECT_EQ(eval.size(), training.size());
  EXPECT_EQ(std::count(eval.begin(), eval.end(), true), 0);
  // One inlining, one module: the eval-mode graph is made from the training capture's.
  EXPECT_EQ(eval_model.forward, train.forward);
  EXPECT_TRUE(train.model.module.is_training());
}

// The eval-mode graph, made from the training capture without capturing again, computes
// what the module computes after module.eval(): a GPT with dropout, and a DenseNet with
// BatchNorm (running statistics) and dropout.
TEST(EvalMode, TheEvalGraphComputesWhatTheModuleComputesInEvalMode) {
  Config densenet;
  densenet.model.name = test::fixturePath("real/densenet.pt");
  densenet.model.input_dtype = InputDtype::kFloat32;
  densenet.model.input_shape = {4, 3, 32, 32};
  densenet.train.batch_size = 4;
  Config gpt = test::builtinConfig("gpt", 2);
  gpt.model.dropout = 0.5;
  for (const Config& config : {densenet, gpt}) {
    const ModelSplit train = splitModel(config);
    const CapturedModel eval = evalCaptureOf(train, config, nullptr);
    std::vector<c10::IValue> inputs(eval.example_inputs.begin(), eval.example_inputs.end());
    for (const ModelParameter& p : eval.graph.parameters) inputs.emplace_back(p.value);
    at::NoGradGuard no_grad;
    const at::Tensor graph_out =
        GraphRunner(eval.graph.graph->copy(), "eval").run(inputs).at(0).toTensor();
    torch::jit::Module module = train.model.module.clone();
    module.eval();
    const at::Tensor module_out = firstModelOutput(module.forward({eval.example_inputs.at(0)}));
    EXPECT_TRUE(at::allclose(graph_out, module_out, 1e-5, 1e-6)) << config.model.name;
  }
}

// --train.precision bf16: the model is captured in bf16 (parameters, example run, the
// cut's tensors), with its fp32 values kept as the master weights.
TEST(Precision, Bf16CapturesTheModelInBf16AndKeepsItsFp32Values) {
  Config config = test::builtinConfig("gpt", 2);
  const CapturedModel fp32 = captureForSplit(config);
  config.train.precision = Precision::kBf16;
  const CapturedModel bf16 = captureForSplit(config);
  EXPECT_EQ(fp32.compute_dtype, at::kFloat);
  EXPECT_TRUE(fp32.master_values.empty());
  ASSERT_EQ(bf16.compute_dtype, at::kBFloat16);
  EXPECT_TRUE(bf16.precision_fallback.empty());
  ASSERT_EQ(bf16.graph.parameters.size(), fp32.graph.parameters.size());
  for (size_t p = 0; p < bf16.graph.parameters.size(); ++p) {
    const ModelParameter& low = bf16.graph.parameters[p];
    const at::Tensor& exact = fp32.graph.parameters[p].value;
    if (!exact.is_floating_point()) continue;
    EXPECT_EQ(low.value.scalar_type(), at::kBFloat16) << low.path;
    EXPECT_TRUE(at::equal(bf16.master_values.at(low.path), exact)) << low.path;
  }
  const ModelSplit split = splitCaptured(bf16, config.pipeline);
  for (const BoundaryTensor& out : split.stages.back().outputs) {
    EXPECT_EQ(out.meta.dtype, at::kBFloat16) << out.name;
  }
}

// An op this LibTorch has no bf16 CPU kernel for (cdist, in 1.13 and 2.11): the model is
// captured in fp32, and the reason names the op and its module.
TEST(Precision, Bf16FallsBackToFp32WhereAnOpHasNoBf16Kernel) {
  ScriptModuleBuilder builder;
  torch::jit::Module model = builder.make(
      "WithCdist",
      [](torch::jit::Module& m) {
        m.register_parameter("w", at::randn({8, 8}), false);
      },
      R"(
def forward(self, x):
    return torch.cdist(torch.matmul(x, self.w), x)
)");
  const std::string path = ::testing::TempDir() + "/with_cdist.pt";
  model.save(path);
  Config config;
  config.model.name = path;
  config.model.input_dtype = InputDtype::kFloat32;
  config.model.input_shape = {4, 8};
  config.train.batch_size = 4;
  config.train.precision = Precision::kBf16;
  const CapturedModel captured = captureForSplit(config);
  EXPECT_EQ(captured.compute_dtype, at::kFloat);
  EXPECT_NE(captured.precision_fallback.find("cdist"), std::string::npos)
      << captured.precision_fallback;
  EXPECT_NE(captured.precision_fallback.find("BFloat16"), std::string::npos);
  // The module loaded once, its tensors back to their fp32 values bitwise.
  ASSERT_EQ(captured.graph.parameters.size(), 1u);
  EXPECT_TRUE(at::equal(captured.graph.parameters[0].value, model.attr("w").toTensor()));
  EXPECT_TRUE(captured.master_values.empty());
}

}  // namespace
}  // namespace ppstage
