// The splitter's contract: for every model and every stage count N, chaining the N
// StageModules in one process computes the unsplit model's outputs, and after backward of
// the same loss, every parameter's gradient (tied copies' gradients summed).
// Reference: the original torch::jit::Module's own forward and autograd.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "ppstage/graph/graph_runner.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/models/model_source.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/split/stage_plan.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

constexpr double kTolerance = 1e-6;  // relative, per tensor

struct ModelCase {
  std::string name;
  Config config;
  // Built from ops in the same order as the module's own forward: outputs and gradients must
  // be bitwise equal, not only within tolerance.
  bool bitwise;
};

std::vector<ModelCase> modelCases() {
  return {
      {"gpt_tied", test::builtinConfig("gpt", 4, true), true},
      {"gpt_untied", test::builtinConfig("gpt", 3, false), true},
      {"mlp", test::builtinConfig("mlp", 6), true},
      {"hf_gpt2", test::fixtureConfig("hf_gpt2.pt"), false},
      {"traced_gpt", test::fixtureConfig("traced_gpt.pt"), false},
      {"unet", test::fixtureConfig("unet.pt"), false},
  };
}

std::vector<at::Tensor> flattenTensors(const c10::IValue& value) {
  if (value.isTensor()) return {value.toTensor()};
  std::vector<at::Tensor> out;
  for (const c10::IValue& item : value.toTupleRef().elements()) {
    for (const at::Tensor& t : flattenTensors(item)) out.push_back(t);
  }
  return out;
}

// loss = sum_i <output_i, weight_i>: every output element gets its own gradient.
at::Tensor weightedLoss(const std::vector<at::Tensor>& outputs,
                        const std::vector<at::Tensor>& weights) {
  at::Tensor loss = at::zeros({}, at::kDouble);
  for (size_t i = 0; i < outputs.size(); ++i) {
    loss = loss + (outputs[i].to(at::kDouble) * weights[i]).sum();
  }
  return loss;
}

struct Reference {
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> weights;
  std::map<std::string, at::Tensor> grads;  // by parameter path
};

Reference runReference(LoadedModel& model, const at::Tensor& input) {
  Reference ref;
  for (const auto& p : model.module.named_parameters()) p.value.mutable_grad() = at::Tensor();
  ref.outputs = flattenTensors(model.module.forward({input}));
  at::Generator gen = at::detail::createCPUGenerator(7);
  for (const at::Tensor& out : ref.outputs) {
    ref.weights.push_back(at::randn(out.sizes(), gen, at::kDouble));
  }
  weightedLoss(ref.outputs, ref.weights).backward();
  for (const auto& p : model.module.named_parameters()) {
    ref.grads[p.name] = p.value.grad().defined() ? p.value.grad().clone() : at::Tensor();
  }
  for (at::Tensor& out : ref.outputs) out = out.detach();
  return ref;
}

std::vector<at::Tensor> runChain(const std::vector<StageModule>& stages,
                                 const at::Tensor& input) {
  std::vector<c10::IValue> activations{input};
  for (const StageModule& stage : stages) {
    std::vector<c10::IValue> inputs = activations;
    for (const StageParameter& p : stage.parameters) inputs.emplace_back(p.value);
    activations = GraphRunner(stage.graph, "stage").run(inputs);
  }
  std::vector<at::Tensor> outputs;
  for (const c10::IValue& v : activations) outputs.push_back(v.toTensor());
  return outputs;
}

// Gradient of model parameter `index` as the stages hold it: the sum over the copies of its
// tensor, under any of its paths (a tied embedding is wte.weight in one stage and
// lm_head.weight in another).
at::Tensor chainGrad(const ModelGraph& graph, const std::vector<StageModule>& stages,
                     int index) {
  const int tie = graph.parameters[index].tie_group;
  const std::vector<int> paths = tie < 0 ? std::vector<int>{index} : graph.ties[tie];
  at::Tensor sum;
  for (const StageModule& stage : stages) {
    for (const StageParameter& p : stage.parameters) {
      const auto& owned = p.model_parameters;
      const bool holds = std::any_of(paths.begin(), paths.end(), [&](int path) {
        return std::find(owned.begin(), owned.end(), path) != owned.end();
      });
      if (!holds) continue;
      if (!p.value.grad().defined()) continue;
      sum = sum.defined() ? sum + p.value.grad() : p.value.grad().clone();
    }
  }
  return sum;
}

void PrintTo(const ModelCase& c, std::ostream* out) { *out << c.name; }

class StageChainTest : public testing::TestWithParam<ModelCase> {};

TEST_P(StageChainTest, MatchesUnsplitModelForEveryStageCount) {
  const ModelCase& c = GetParam();
  LoadedModel model = loadModel(c.config.model, c.config.train);
  const ModelGraph graph = captureModel(model.module);
  const at::Tensor input =
      makeExampleInput(model.input, c.config.train.batch_size, /*seed=*/3);
  const ValueShapes shapes = recordValueShapes(graph, input);
  const Reference ref = runReference(model, input);
  const size_t units = findUnits(graph, shapes).size();
  const size_t max_stages = std::min<size_t>(8, units);
  ASSERT_GE(max_stages, 2u) << c.name << " must be splittable";

  for (size_t n = 1; n <= max_stages; ++n) {
    for (const std::string balance : {"params", "flops"}) {
      PipelineConfig pipeline;
      pipeline.stages = static_cast<int64_t>(n);
      pipeline.balance = balance;
      const StagePlan plan = planStages(graph, shapes, pipeline);
      ASSERT_EQ(plan.numStages(), n);
      const std::vector<StageModule> stages = extractStages(graph, plan, shapes);
      const std::vector<at::Tensor> outputs = runChain(stages, input);

      ASSERT_EQ(outputs.size(), ref.outputs.size());
      double worst_output = 0;
      for (size_t i = 0; i < outputs.size(); ++i) {
        ASSERT_EQ(outputs[i].sizes(), ref.outputs[i].sizes());
        worst_output = std::max(worst_output, test::maxRelDiff(outputs[i], ref.outputs[i]));
        if (c.bitwise) EXPECT_TRUE(at::equal(outputs[i], ref.outputs[i])) << "output " << i;
      }
      EXPECT_LE(worst_output, kTolerance) << c.name << " N=" << n << " " << balance;

      weightedLoss(outputs, ref.weights).backward();
      double worst_grad = 0;
      for (size_t p = 0; p < graph.parameters.size(); ++p) {
        const ModelParameter& mp = graph.parameters[p];
        if (!mp.is_parameter) continue;
        const at::Tensor& expected = ref.grads.at(mp.path);
        const at::Tensor got = chainGrad(graph, stages, static_cast<int>(p));
        ASSERT_EQ(got.defined(), expected.defined()) << mp.path;
        if (!expected.defined()) continue;
        const double diff = test::maxRelDiff(got, expected);
        worst_grad = std::max(worst_grad, diff);
        EXPECT_LE(diff, kTolerance) << c.name << " N=" << n << " gradient of " << mp.path;
        if (c.bitwise) EXPECT_TRUE(at::equal(got, expected)) << "gradient of " << mp.path;
      }
      std::cout << c.name << " N=" << n << " (" << balance << "): max rel diff outputs "
                << worst_output << ", gradients " << worst_grad << "\n";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, StageChainTest, testing::ValuesIn(modelCases()),
                         [](const testing::TestParamInfo<ModelCase>& info) {
                           return info.param.name;
                         });

// Tied embedding and head on different stages: each stage holds a copy, the plan lists the
// pair, and the copies' gradients add up to the tied parameter's gradient (checked above).
TEST(StageChainTies, TiedEmbeddingAndHeadAreOneTieGroupAcrossStages) {
  const Config config = test::builtinConfig("gpt", 4, true);
  LoadedModel model = loadModel(config.model, config.train);
  const ModelGraph graph = captureModel(model.module);
  const ValueShapes shapes =
      recordValueShapes(graph, makeExampleInput(model.input, 4, 0));
  PipelineConfig pipeline;
  pipeline.stages = 3;
  const std::vector<StageModule> stages =
      extractStages(graph, planStages(graph, shapes, pipeline), shapes);
  const std::vector<TiedParameter> ties = findTiedParameters(graph, stages);
  ASSERT_EQ(ties.size(), 1u);
  ASSERT_EQ(ties[0].copies.size(), 2u);
  EXPECT_EQ(ties[0].copies[0].stage, 0);
  EXPECT_EQ(ties[0].copies[0].name, "wte.weight");
  EXPECT_EQ(ties[0].copies[1].stage, 2);
  EXPECT_EQ(ties[0].copies[1].name, "lm_head.weight");
  // Copies, not the module's tensor: the runtime updates each stage on its own.
  const at::Tensor& original = model.module.attr("wte").toModule().attr("weight").toTensor();
  const at::Tensor& copy = stages[0].parameters[ties[0].copies[0].parameter].value;
  EXPECT_NE(copy.data_ptr(), original.data_ptr());
  EXPECT_TRUE(at::equal(copy, original));
}

TEST(StageChainTies, OneStageHoldsBothPathsOfATiedTensorOnce) {
  const Config config = test::builtinConfig("gpt", 2, true);
  LoadedModel model = loadModel(config.model, config.train);
  const ModelGraph graph = captureModel(model.module);
  const ValueShapes shapes = recordValueShapes(graph, makeExampleInput(model.input, 4, 0));
  PipelineConfig pipeline;
  pipeline.stages = 1;
  const std::vector<StageModule> stages =
      extractStages(graph, planStages(graph, shapes, pipeline), shapes);
  const auto& params = stages[0].parameters;
  const auto wte = std::find_if(params.begin(), params.end(),
                                [](const StageParameter& p) { return p.name == "wte.weight"; });
  ASSERT_NE(wte, params.end());
  EXPECT_EQ(wte->aliases, std::vector<std::string>{"lm_head.weight"});
  EXPECT_TRUE(findTiedParameters(graph, stages).empty());
}

}  // namespace
}  // namespace ppstage
