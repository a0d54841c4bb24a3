// The splitter's contract: for every model and every stage count N, chaining the N
// StageModules in one process, as a pipeline runs them (inputs received as fresh leaves,
// backward stage by stage), computes the unsplit model's outputs and, after backward of the
// same loss, every parameter's gradient (tied copies' gradients summed). What crosses each
// cut is what the plan says, at the plan's batch and at another.
// Reference: the original torch::jit::Module's own forward and autograd.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>

#include "ppstage/core/error.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/graph_runner.h"
#include "ppstage/graph/value_shapes.h"
#include "ppstage/models/model_source.h"
#include "ppstage/models/script_module_builder.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/split/stage_partition.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

constexpr double kTolerance = 1e-6;  // relative, per tensor

struct ModelCase {
  std::string name;
  std::function<LoadedModel()> load;
  int64_t batch;
  // Built from ops in the same order as the module's own forward: outputs and gradients must
  // be bitwise equal, not only within tolerance.
  bool bitwise;
};

ModelCase fromConfig(const std::string& name, const Config& config, bool bitwise) {
  return {name, [config] { return loadModel(config.model, config.train); }, config.train.batch_size,
          bitwise};
}

// A model that writes in place into what its second module receives (relu_, *=) and keeps
// BatchNorm running statistics (buffers written in place).
LoadedModel inPlaceModel() {
  ScriptModuleBuilder builder;
  at::manual_seed(5);
  auto linear = [&](int64_t in, int64_t out) {
    return builder.make(
        "Linear",
        [&](torch::jit::Module& m) {
          m.register_parameter("weight", at::randn({out, in}) * 0.3, false);
          m.register_parameter("bias", at::randn({out}) * 0.1, false);
        },
        "\ndef forward(self, x):\n    return torch.linear(x, self.weight, self.bias)\n");
  };
  auto residual = builder.make(
      "InPlaceResidual", [&](torch::jit::Module& m) { m.register_module("fc", linear(8, 8)); }, R"(
def forward(self, x):
    x = torch.relu_(x)
    x = x + self.fc.forward(x)
    x *= 0.5
    return x
)");
  auto norm = builder.make(
      "BatchNorm",
      [&](torch::jit::Module& m) {
        m.register_parameter("weight", at::ones({8}), false);
        m.register_parameter("bias", at::zeros({8}), false);
        m.register_buffer("running_mean", at::zeros({8}));
        m.register_buffer("running_var", at::ones({8}));
      },
      R"(
def forward(self, x):
    return torch.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                            True, 0.1, 1e-5, False)
)");
  auto top = builder.make(
      "InPlaceNet",
      [&](torch::jit::Module& m) {
        m.register_module("first", linear(8, 8));
        m.register_module("residual", residual);
        m.register_module("norm", norm);
        m.register_module("last", linear(8, 4));
      },
      R"(
def forward(self, x):
    h = self.first.forward(x)
    h = self.residual.forward(h)
    return self.last.forward(self.norm.forward(h))
)");
  return {top, "inplace", InputSpec{at::kFloat, {6, 8}, 0}};
}

std::vector<ModelCase> modelCases() {
  return {
      fromConfig("gpt_tied", test::builtinConfig("gpt", 4, true), true),
      fromConfig("gpt_untied", test::builtinConfig("gpt", 3, false), true),
      fromConfig("mlp", test::builtinConfig("mlp", 6), true),
      fromConfig("hf_gpt2", test::fixtureConfig("hf_gpt2.pt"), false),
      fromConfig("traced_gpt", test::fixtureConfig("traced_gpt.pt"), false),
      fromConfig("unet", test::fixtureConfig("unet.pt"), false),
      {"inplace", inPlaceModel, 6, true},
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

// What crossed each boundary must be what the plan said: sizes (at `batch`, from the
// planned dims when `batch` is not the plan's), dtype and requires_grad.
void expectMatchesPlan(const std::vector<c10::IValue>& values,
                       const std::vector<BoundaryTensor>& planned, int64_t batch,
                       int64_t plan_batch) {
  ASSERT_EQ(values.size(), planned.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const at::Tensor& t = values[i].toTensor();
    const TensorMeta& meta = planned[i].meta;
    std::vector<int64_t> sizes = meta.sizes;
    if (batch != plan_batch) {
      ASSERT_EQ(meta.dims.size(), sizes.size()) << planned[i].name;
      ASSERT_FALSE(meta.follows_length) << planned[i].name;
      for (size_t d = 0; d < sizes.size(); ++d) sizes[d] = meta.dims[d].at(batch);
    }
    EXPECT_EQ(t.sizes().vec(), sizes) << planned[i].name << " at batch " << batch;
    EXPECT_EQ(t.scalar_type(), meta.dtype) << planned[i].name;
    if (at::GradMode::is_enabled())
      EXPECT_EQ(t.requires_grad(), meta.requires_grad) << planned[i].name;
  }
}

// The stages run as the pipeline runs them: each stage's inputs are fresh autograd leaves
// (as if received from another rank), and backward goes stage by stage, last to first,
// each stage's input gradients becoming the previous stage's output gradients.
class Chain {
 public:
  Chain(const std::vector<StageModule>& stages, int64_t plan_batch)
      : stages_(stages), plan_batch_(plan_batch) {}

  std::vector<at::Tensor> forward(const at::Tensor& input) {
    return forward(std::vector<at::Tensor>{input});
  }

  // One tensor per model input.
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& model_inputs) {
    const at::Tensor& input = model_inputs.at(0);
    std::vector<c10::IValue> activations(model_inputs.begin(), model_inputs.end());
    inputs_.clear();
    outputs_.clear();
    for (const StageModule& stage : stages_) {
      std::vector<at::Tensor> received;
      for (const c10::IValue& a : activations) {
        at::Tensor leaf = a.toTensor().detach();
        if (a.toTensor().requires_grad()) leaf.requires_grad_(true);
        received.push_back(leaf);
      }
      activations = GraphRunner(stage.graph, "stage").run(stage.arguments(received));
      expectMatchesPlan(activations, stage.outputs, input.size(0), plan_batch_);
      inputs_.push_back(received);
      outputs_.emplace_back();
      for (const c10::IValue& v : activations) outputs_.back().push_back(v.toTensor());
    }
    return outputs_.back();
  }

  // Backward of `loss` (a function of the last stage's outputs), stage by stage.
  void backward(const at::Tensor& loss) {
    loss.backward();
    for (size_t s = stages_.size() - 1; s-- > 0;) {
      std::vector<at::Tensor> roots, grads;
      for (size_t k = 0; k < outputs_[s].size(); ++k) {
        const at::Tensor& grad = inputs_[s + 1][k].grad();
        if (!outputs_[s][k].requires_grad() || !grad.defined()) continue;
        roots.push_back(outputs_[s][k]);
        grads.push_back(grad);
      }
      if (!roots.empty()) torch::autograd::backward(roots, grads);
    }
  }

 private:
  const std::vector<StageModule>& stages_;
  int64_t plan_batch_;
  std::vector<std::vector<at::Tensor>> inputs_, outputs_;
};

// Gradient of model parameter `index` as the stages hold it: the sum over the copies of its
// tensor, under any of its paths (a tied embedding is wte.weight in one stage and
// lm_head.weight in another).
at::Tensor chainGrad(const ModelGraph& graph, const std::vector<StageModule>& stages, int index) {
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
  LoadedModel model = c.load();
  const ModelGraph graph = captureModel(model.module);
  const at::Tensor input = makeExampleInput(model.input, c.batch, /*seed=*/3);
  const ValueShapes shapes = recordValueShapes(
      graph, [&](int64_t b) { return makeExampleInputs(model.input, b, 3); }, c.batch);
  const Reference ref = runReference(model, input);
  const size_t units = findUnits(graph, shapes).size();
  const size_t max_stages = std::min<size_t>(8, units);
  ASSERT_GE(max_stages, 2u) << c.name << " must be splittable";

  for (size_t n = 1; n <= max_stages; ++n) {
    for (const Balance balance : {Balance::kParams, Balance::kFlops}) {
      PipelineConfig pipeline;
      pipeline.stages = static_cast<int64_t>(n);
      pipeline.balance = balance;
      const StagePartition plan = partitionStages(graph, shapes, pipeline);
      ASSERT_EQ(plan.numStages(), n);
      const std::vector<StageModule> stages = extractStages(graph, plan, shapes);
      {
        // Another batch size: every boundary follows its planned per-sample growth.
        at::NoGradGuard no_grad;
        Chain(stages, c.batch).forward(makeExampleInput(model.input, c.batch + 3, 4));
      }
      Chain chain(stages, c.batch);
      const std::vector<at::Tensor> outputs = chain.forward(input);

      ASSERT_EQ(outputs.size(), ref.outputs.size());
      double worst_output = 0;
      for (size_t i = 0; i < outputs.size(); ++i) {
        ASSERT_EQ(outputs[i].sizes(), ref.outputs[i].sizes());
        worst_output = std::max(worst_output, test::maxRelDiff(outputs[i], ref.outputs[i]));
        if (c.bitwise) EXPECT_TRUE(at::equal(outputs[i], ref.outputs[i])) << "output " << i;
      }
      EXPECT_LE(worst_output, kTolerance) << c.name << " N=" << n << " " << toString(balance);

      chain.backward(weightedLoss(outputs, ref.weights));
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
      std::cout << c.name << " N=" << n << " (" << toString(balance) << "): max rel diff outputs "
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
  const ValueShapes shapes = recordValueShapes(
      graph, [&](int64_t b) { return makeExampleInputs(model.input, b, 0); }, 4);
  PipelineConfig pipeline;
  pipeline.stages = 3;
  const std::vector<StageModule> stages =
      extractStages(graph, partitionStages(graph, shapes, pipeline), shapes);
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
  const ValueShapes shapes = recordValueShapes(
      graph, [&](int64_t b) { return makeExampleInputs(model.input, b, 0); }, 4);
  PipelineConfig pipeline;
  pipeline.stages = 1;
  const std::vector<StageModule> stages =
      extractStages(graph, partitionStages(graph, shapes, pipeline), shapes);
  const auto& params = stages[0].parameters;
  const auto wte = std::find_if(params.begin(), params.end(),
                                [](const StageParameter& p) { return p.name == "wte.weight"; });
  ASSERT_NE(wte, params.end());
  EXPECT_EQ(wte->aliases, std::vector<std::string>{"lm_head.weight"});
  EXPECT_TRUE(findTiedParameters(graph, stages).empty());
}

// A model with three inputs (Hugging Face style: input_ids, attention_mask, labels in; a
// dict with the loss out): the labels, read only by the loss at the end, cross every cut
// from stage 0; the dict's loss comes out first. Chained stages equal the unsplit model.
TEST(StageChainInputs, InputsALaterStageReadsCrossTheCuts) {
  torch::jit::Module module = torch::jit::load(test::fixturePath("hf_gpt2_loss.pt"));
  const std::vector<std::string> names{"input_ids", "attention_mask", "labels"};
  at::Generator gen = at::detail::createCPUGenerator(5);
  const auto make = [&](int64_t batch) {
    at::Tensor ids = at::randint(96, {batch, 16}, gen, at::kLong);
    at::Tensor mask = at::ones({batch, 16}, at::kLong);
    mask.narrow(1, 10, 6).zero_();
    at::Tensor labels = at::randint(96, {batch, 16}, gen, at::kLong).masked_fill(mask.eq(0), -100);
    return std::vector<at::Tensor>{ids, mask, labels};
  };
  const ModelGraph graph = captureModel(module, names, make(2));
  EXPECT_EQ(graph.input_names, names);
  const ValueShapes shapes = recordValueShapes(graph, make, 4);
  const std::vector<at::Tensor> inputs = make(4);
  c10::impl::GenericDict expected = [&] {
    at::NoGradGuard no_grad;
    return module
        .get_method("forward")(
            {}, {{"input_ids", inputs[0]}, {"attention_mask", inputs[1]}, {"labels", inputs[2]}})
        .toGenericDict();
  }();
  for (const int64_t n : {2, 3}) {
    PipelineConfig pipeline;
    pipeline.stages = n;
    const std::vector<StageModule> stages =
        extractStages(graph, partitionStages(graph, shapes, pipeline), shapes);
    ASSERT_EQ(stages.front().inputs.size(), 3u);
    for (size_t s = 1; s < stages.size(); ++s) {
      const auto& in = stages[s].inputs;
      EXPECT_TRUE(std::any_of(
          in.begin(), in.end(),
          [](const BoundaryTensor& t) { return t.name == "labels" && t.producer_stage == -1; }))
          << "stage " << s << " of " << n << " does not receive the labels";
    }
    at::NoGradGuard no_grad;
    const std::vector<at::Tensor> outputs = Chain(stages, 4).forward(inputs);
    ASSERT_EQ(outputs.size(), 2u);
    EXPECT_EQ(outputs[0].dim(), 0) << "the loss comes first";
    EXPECT_LE(test::maxRelDiff(outputs[0], expected.at("loss").toTensor()), kTolerance);
    EXPECT_LE(test::maxRelDiff(outputs[1], expected.at("logits").toTensor()), kTolerance);
  }
}

}  // namespace
}  // namespace ppstage

namespace ppstage {
namespace {

TEST(StageChainState, ShapeProbesLeaveTheModuleBuffersAlone) {
  LoadedModel model = inPlaceModel();
  const ModelGraph graph = captureModel(model.module);
  const at::Tensor before =
      model.module.attr("norm").toModule().attr("running_mean").toTensor().clone();
  recordValueShapes(
      graph, [&](int64_t b) { return makeExampleInputs(model.input, b, 0); }, 6);
  EXPECT_TRUE(
      at::equal(model.module.attr("norm").toModule().attr("running_mean").toTensor(), before));
}

TEST(StageChainState, ABufferWrittenInOneStageAndReadInAnotherIsRejected) {
  ScriptModuleBuilder builder;
  auto linear = [&] {
    return builder.make(
        "Linear",
        [&](torch::jit::Module& m) {
          m.register_parameter("weight", at::randn({4, 4}), false);
        },
        "\ndef forward(self, x):\n    return torch.linear(x, self.weight)\n");
  };
  auto top = builder.make(
      "Counting",
      [&](torch::jit::Module& m) {
        m.register_module("a", linear());
        m.register_module("b", linear());
        m.register_buffer("seen", at::zeros({}));
      },
      R"(
def forward(self, x):
    h = self.a.forward(x)
    self.seen.add_(1.0)
    return self.b.forward(h) * self.seen
)");
  LoadedModel model{top, "counting", InputSpec{at::kFloat, {2, 4}, 0}};
  const ModelGraph graph = captureModel(model.module);
  const ValueShapes shapes = recordValueShapes(
      graph, [&](int64_t b) { return makeExampleInputs(model.input, b, 0); }, 2);
  PipelineConfig pipeline;
  pipeline.split_points = {"b"};
  try {
    extractStages(graph, partitionStages(graph, shapes, pipeline), shapes);
    FAIL() << "expected ppstage::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'seen' is written in place"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ppstage
