// graph::capture: inlining with full module paths, parameter lifting, forward signatures.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <map>
#include <set>

#include "ppstage/core/error.h"
#include "ppstage/graph/capture.h"
#include "ppstage/graph/device_constants.h"
#include "ppstage/graph/embedding_tables.h"
#include "ppstage/graph/graph_runner.h"
#include "ppstage/graph/model_graph.h"
#include "ppstage/graph/random_stream.h"
#include "ppstage/models/model_source.h"
#include "ppstage/models/script_module_builder.h"
#include "support/error_of.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

std::set<std::string> callPaths(const ModelGraph& graph) {
  std::set<std::string> paths;
  for (const ModuleCall& call : graph.calls) paths.insert(call.path);
  return paths;
}

std::set<std::string> nodePaths(const ModelGraph& graph) {
  std::set<std::string> paths;
  for (const torch::jit::Node* node : graph.graph->nodes()) paths.insert(graph.modulePathOf(node));
  return paths;
}

ModelGraph captureConfig(const Config& config, LoadedModel* keep = nullptr) {
  LoadedModel model = loadModel(config.model, config.train);
  ModelGraph graph = captureModel(model.module);
  if (keep) *keep = model;
  return graph;
}

TEST(Capture, GptNodesCarryFullModulePaths) {
  const ModelGraph graph = captureConfig(test::builtinConfig("gpt", 4));
  const std::set<std::string> nodes = nodePaths(graph);
  for (const char* path : {"wte", "wpe", "layers.0.ln1", "layers.3.attn", "layers.3.attn.qkv",
                           "layers.2.mlp.fc", "ln_f", "lm_head"}) {
    EXPECT_TRUE(nodes.count(path)) << path;
  }
  EXPECT_TRUE(callPaths(graph).count("layers.3.mlp.proj"));
  // Every call and free function is gone: one flat graph.
  for (const torch::jit::Node* node : graph.graph->nodes()) {
    EXPECT_NE(node->kind(), c10::prim::CallMethod);
    EXPECT_NE(node->kind(), c10::prim::GetAttr);
  }
}

TEST(Capture, LiftsEveryParameterPathAndFindsTies) {
  LoadedModel model;
  const ModelGraph tied = captureConfig(test::builtinConfig("gpt", 2, true), &model);
  std::set<std::string> expected;
  for (const auto& p : model.module.named_parameters()) expected.insert(p.name);
  std::set<std::string> lifted;
  for (const ModelParameter& p : tied.parameters) lifted.insert(p.path);
  EXPECT_EQ(lifted, expected);
  EXPECT_EQ(tied.graph->inputs().size(), 1 + tied.parameters.size());
  ASSERT_EQ(tied.ties.size(), 1u);
  std::set<std::string> group;
  for (int i : tied.ties[0]) group.insert(tied.parameters[i].path);
  EXPECT_EQ(group, (std::set<std::string>{"wte.weight", "lm_head.weight"}));

  const ModelGraph untied = captureConfig(test::builtinConfig("gpt", 2, false));
  EXPECT_TRUE(untied.ties.empty());
}

TEST(Capture, CapturedGraphComputesWhatTheModuleComputes) {
  for (const std::string fixture : {"hf_gpt2.pt", "traced_gpt.pt", "unet.pt"}) {
    LoadedModel model;
    const ModelGraph graph = captureConfig(test::fixtureConfig(fixture), &model);
    const at::Tensor input = makeExampleInput(model.input, 2, 1);
    std::vector<c10::IValue> inputs{input};
    for (const ModelParameter& p : graph.parameters) inputs.emplace_back(p.value);
    const std::vector<c10::IValue> got = GraphRunner(graph.graph, "model").run(inputs);
    const c10::IValue expected = model.module.forward({input});
    const at::Tensor first =
        expected.isTensor() ? expected.toTensor() : expected.toTupleRef().elements()[0].toTensor();
    EXPECT_LE(test::maxRelDiff(got[0].toTensor(), first), 1e-6) << fixture;
  }
}

TEST(Capture, HuggingFaceStyleModel) {
  const ModelGraph graph = captureConfig(test::fixtureConfig("hf_gpt2.pt"));
  EXPECT_EQ(graph.input_names, std::vector<std::string>{"input_ids"});
  EXPECT_EQ(graph.graph->outputs().size(), 2u) << "tuple output flattened";
  const std::set<std::string> nodes = nodePaths(graph);
  EXPECT_TRUE(nodes.count("transformer.h.2.attn")) << "_attn helper belongs to its module";
  EXPECT_TRUE(nodes.count("transformer.h.0.mlp.act"));
  bool buffer = false;
  for (const ModelParameter& p : graph.parameters) {
    if (p.path == "transformer.h.0.attn.bias") buffer = !p.is_parameter;
  }
  EXPECT_TRUE(buffer) << "registered buffers are lifted as non-trainable inputs";
  ASSERT_EQ(graph.ties.size(), 1u) << "lm_head.weight is transformer.wte.weight";
}

TEST(EmbeddingTables, FoundWhereTheDataInputIndexesThem) {
  const LoadedModel gpt = loadModel(test::builtinConfig("gpt", 2).model, TrainConfig{});
  const std::vector<EmbeddingTable> tables = embeddingTablesOf(inlineForward(gpt.module, {}).model);
  ASSERT_EQ(tables.size(), 1u) << "wpe is indexed by positions, not by the data";
  EXPECT_EQ(tables[0].input, 0u);
  EXPECT_EQ(tables[0].path, "wte.weight");
  EXPECT_EQ(tables[0].rows, 64);
  // F.embedding's `if max_norm is not None: input = input.contiguous()` is still a branch
  // when the forward is inlined: the ids reach the table through it.
  const LoadedModel hf = loadModel(test::fixtureConfig("hf_gpt2.pt").model, TrainConfig{});
  const std::vector<EmbeddingTable> hf_tables =
      embeddingTablesOf(inlineForward(hf.module, {"input_ids"}).model);
  ASSERT_EQ(hf_tables.size(), 1u);
  EXPECT_EQ(hf_tables[0].path, "transformer.wte.weight");
  EXPECT_EQ(hf_tables[0].rows, 96);

  checkIdsFit(tables[0], {0, 63}, "input_ids", "--data.path 'x'");
  EXPECT_EQ(test::errorOf([&] {
              checkIdsFit(tables[0], {0, 64}, "input_ids", "--data.path 'x'");
            }),
            "--data.path 'x': the ids of 'input_ids' go up to 64, but they index the model's "
            "embedding 'wte.weight' of 64 rows (ids 0 to 63)");
  EXPECT_NE(test::errorOf([&] {
              checkIdsFit(tables[0], {-1, 3}, "input_ids", "x");
            }).find("go down to -1"),
            std::string::npos);
}

TEST(Capture, TracedModelKeepsSubmodulePaths) {
  const std::set<std::string> nodes =
      nodePaths(captureConfig(test::fixtureConfig("traced_gpt.pt")));
  EXPECT_TRUE(nodes.count("blocks.1.ff.0"));
  EXPECT_TRUE(nodes.count("blocks.2.qkv"));
  EXPECT_TRUE(nodes.count("head"));
}

TEST(Capture, RejectsAForwardWithAnInputItCannotFeed) {
  try {
    captureConfig(test::fixtureConfig("two_inputs.pt"));
    FAIL() << "expected ppstage::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes 'y' (Tensor, no default), which no data input"),
              std::string::npos)
        << e.what();
  }
}

torch::jit::Module maskedModel() {
  ScriptModuleBuilder builder;
  return builder.make(
      "Masked", [](torch::jit::Module&) {}, R"(
def forward(self, input_ids, scale: float = 2.0, attention_mask: Optional[Tensor] = None):
    h = input_ids.float() * scale
    if attention_mask is not None:
        h = h * attention_mask
    return h
)");
}

// Data fields meet forward's arguments by name, by --model.inputs, or (one and one) by place.
TEST(Capture, InputsAreBoundByNameByMappingOrByPlace) {
  const torch::jit::Module module = maskedModel();
  const InputBinding by_name = bindInputs(module, {"attention_mask", "input_ids"}, {});
  EXPECT_EQ(by_name.arguments, (std::vector<std::string>{"input_ids", "attention_mask"}));
  EXPECT_EQ(by_name.fields, (std::vector<size_t>{1, 0}));
  const InputBinding by_place = bindInputs(module, {"tokens"}, {});
  EXPECT_EQ(by_place.arguments, std::vector<std::string>{"input_ids"});
  const InputBinding mapped =
      bindInputs(module, {"mask", "tokens", "extra"}, {"input_ids=tokens", "attention_mask=mask"});
  EXPECT_EQ(mapped.arguments, (std::vector<std::string>{"input_ids", "attention_mask"}));
  EXPECT_EQ(mapped.fields, (std::vector<size_t>{1, 0}));
  EXPECT_NE(test::errorOf([&] {
              bindInputs(module, {"tokens", "mask"}, {});
            })
                .find("the data gives 'tokens', which is no argument of the model's forward "
                      "(it takes input_ids, scale, attention_mask)"),
            std::string::npos);
  EXPECT_NE(test::errorOf([&] {
              bindInputs(module, {"tokens"}, {"ids=tokens"});
            }).find("--model.inputs names 'ids', which the model's forward does not take"),
            std::string::npos);
  EXPECT_NE(test::errorOf([&] {
              bindInputs(module, {"mask"}, {"attention_mask=mask"});
            }).find("needs 'input_ids', which no data field feeds"),
            std::string::npos);
}

// A fed Optional[Tensor] is a tensor: its `is not None` test folds and the branch stays.
TEST(Capture, SeveralInputsBecomeGraphInputsInForwardsOrder) {
  const torch::jit::Module module = maskedModel();
  const at::Tensor ids = at::arange(6).reshape({2, 3});
  const at::Tensor mask = at::tensor({1, 1, 0, 1, 0, 0}, at::kLong).reshape({2, 3});
  const ModelGraph graph = captureModel(module, {"input_ids", "attention_mask"}, {ids, mask});
  EXPECT_EQ(graph.input_names, (std::vector<std::string>{"input_ids", "attention_mask"}));
  ASSERT_EQ(graph.graph->inputs().size(), 2u);
  for (const torch::jit::Node* node : graph.graph->nodes()) {
    EXPECT_NE(node->kind(), c10::prim::If) << "the None test is decided";
  }
  const auto out = GraphRunner(graph.graph, "masked").run({ids, mask});
  EXPECT_TRUE(at::equal(out.at(0).toTensor(), ids.to(at::kFloat) * 2 * mask));
}

torch::jit::Module scripted(const std::string& source) {
  ScriptModuleBuilder builder;
  return builder.make(
      "Scripted",
      [](torch::jit::Module& m) { m.register_attribute("count", c10::IntType::get(), 0); }, source);
}

TEST(Capture, RejectsForwardThatAssignsModuleState) {
  const auto module = scripted(R"(
def forward(self, x):
    self.count = self.count + 1
    return x * 2
)");
  EXPECT_THROW(captureModel(module), Error);
}

TEST(Capture, RejectsNonTensorOutput) {
  const auto module = scripted(R"(
def forward(self, x):
    return x.size(0)
)");
  EXPECT_THROW(captureModel(module), Error);
}

TEST(Capture, ExtraArgumentsWithDefaultsAreBakedIn) {
  const auto module = scripted(R"(
def forward(self, x, scale: float = 3.0, mask: Optional[Tensor] = None):
    if mask is not None:
        x = x * mask
    return x * scale
)");
  const ModelGraph graph = captureModel(module);
  EXPECT_EQ(graph.graph->inputs().size(), 1u);
  const at::Tensor x = at::ones({2});
  const auto out = GraphRunner(graph.graph, "m").run({x});
  EXPECT_TRUE(at::equal(out[0].toTensor(), x * 3.0));
}

}  // namespace
}  // namespace ppstage

namespace ppstage {
namespace {

TEST(Capture, ATupleReturnedThroughAFoldedBranchIsFlattened) {
  const auto module = scripted(R"(
def forward(self, x, labels: Optional[Tensor] = None):
    if labels is not None:
        return x * 2, labels
    return x * 3, x + 1
)");
  const ModelGraph graph = captureModel(module);
  ASSERT_EQ(graph.graph->outputs().size(), 2u);
  const auto out = GraphRunner(graph.graph, "m").run({at::ones({2})});
  EXPECT_TRUE(at::equal(out[0].toTensor(), at::full({2}, 3.0)));
  EXPECT_TRUE(at::equal(out[1].toTensor(), at::full({2}, 2.0)));
}

}  // namespace
}  // namespace ppstage

// --- keyed random ops (Note [Keyed random ops]) ---------------------------------------------

namespace ppstage {
namespace {

// One of every kind of random op capture rewrites: dropout family, ops with a generator
// argument, ops moved to their generator overload, *_like ops, in-place fills.
const char* kEveryRandomOp = R"(
def forward(self, x):
    # x: (4, 3, 5)
    a = torch.dropout(x, 0.5, True) + torch.feature_dropout(x, 0.5, True)
    a = a + torch.alpha_dropout(x, 0.5, True) + torch.native_dropout(x, 0.5, True)[0]
    b = torch.rand_like(x) + torch.randn_like(x) + torch.randint_like(x, 7)
    c = torch.rand([4, 3, 5]) + torch.randn([4, 3, 5]) + torch.randint(0, 9, [4, 3, 5])
    d = torch.bernoulli(torch.full([4, 3, 5], 0.5)) + torch.empty([4, 1, 1]).bernoulli_(0.5)
    e = torch.empty([4, 3, 5]).uniform_(0.0, 1.0) + torch.empty([4, 3, 5]).exponential_()
    f = torch.normal(x, 1.0)
    return a + b + c + d + e + f
)";

int countKind(const torch::jit::Block* block, const char* kind) {
  int count = 0;
  for (const torch::jit::Node* node : block->nodes()) {
    if (node->kind() == c10::Symbol::fromQualString(kind)) ++count;
    for (const torch::jit::Block* sub : node->blocks()) count += countKind(sub, kind);
  }
  return count;
}

at::Tensor runWith(const ModelGraph& graph, const at::Tensor& x, const RandomStream& stream) {
  std::vector<c10::IValue> inputs{x};
  for (const ModelParameter& p : graph.parameters) inputs.emplace_back(p.value);
  const RandomStreamScope scope(stream);
  return GraphRunner(graph.graph, "m").run(inputs)[0].toTensor();
}

TEST(KeyedRandom, EveryRandomOpDrawsFromAKeyedGenerator) {
  const ModelGraph graph = captureModel(scripted(kEveryRandomOp));
  for (const torch::jit::Node* node : graph.graph->nodes()) {
    const bool keyed = std::any_of(node->inputs().begin(), node->inputs().end(), [](auto* v) {
      return v->node()->kind() == c10::Symbol::fromQualString("ppstage::keyed_generator");
    });
    EXPECT_TRUE(!node->isNondeterministic() || keyed) << *node;
  }
  EXPECT_EQ(countKind(graph.graph->block(), "aten::dropout"), 0);
  EXPECT_EQ(countKind(graph.graph->block(), "ppstage::dropout"), 1);
  EXPECT_EQ(countKind(graph.graph->block(), "ppstage::native_dropout"), 1);
  // 15 random ops, all in the root call: one key, indices 0..14.
  EXPECT_EQ(countKind(graph.graph->block(), "ppstage::keyed_generator"), 15);
  ASSERT_EQ(graph.parameters.size(), 1u);
  EXPECT_TRUE(graph.parameters[0].random_key);
  EXPECT_EQ(graph.parameters[0].path, "#random_key");
}

TEST(KeyedRandom, DrawsDependOnTheStreamAndNeverOnTheGlobalGenerator) {
  const ModelGraph graph = captureModel(scripted(kEveryRandomOp));
  const at::Tensor x = at::ones({4, 3, 5});
  at::manual_seed(1);
  const at::Tensor first = runWith(graph, x, {7, 3, 2});
  at::manual_seed(2);
  EXPECT_TRUE(at::equal(runWith(graph, x, {7, 3, 2}), first));
  EXPECT_FALSE(at::equal(runWith(graph, x, {8, 3, 2}), first));  // another seed
  EXPECT_FALSE(at::equal(runWith(graph, x, {7, 4, 2}), first));  // another step
  EXPECT_FALSE(at::equal(runWith(graph, x, {7, 3, 1}), first));  // another micro-batch
}

TEST(KeyedRandom, ModulesWithTheSameCodeDrawDifferentNumbers) {
  Config config = test::builtinConfig("mlp", 2);
  config.model.dropout = 0.5;
  const ModelGraph graph = captureConfig(config);
  std::vector<std::string> keys;
  for (const ModelParameter& p : graph.parameters) {
    if (p.random_key) keys.push_back(p.path);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"layers.0.ff.drop#random_key",
                                            "layers.1.ff.drop#random_key"}));
  // The keys differ, so the two blocks' masks do.
  EXPECT_FALSE(at::equal(graph.parameters.end()[-1].value, graph.parameters.end()[-2].value));
}

// A module called twice draws two masks: each call has a key of its own.
TEST(KeyedRandom, AModuleCalledTwiceDrawsTwice) {
  ScriptModuleBuilder builder;
  torch::jit::Module drop = builder.make(
      "Drop", [](torch::jit::Module&) {}, R"(
def forward(self, x):
    return torch.dropout(x, 0.5, True)
)");
  torch::jit::Module model = builder.make(
      "Twice", [&](torch::jit::Module& m) { m.register_module("drop", drop); }, R"(
def forward(self, x):
    return torch.stack([self.drop.forward(x), self.drop.forward(x)])
)");
  const ModelGraph graph = captureModel(model);
  std::vector<std::string> keys;
  for (const ModelParameter& p : graph.parameters) keys.push_back(p.path);
  EXPECT_EQ(keys, (std::vector<std::string>{"drop#random_key", "drop#random_key.1"}));
  const at::Tensor out = runWith(graph, at::ones({64}), {});
  EXPECT_FALSE(at::equal(out[0], out[1]));
}

// nn.MultiheadAttention in training, as torch 2.x scripts it: scaled_dot_product_attention
// with dropout, which draws inside the op. Capture splits it into its softmax, a keyed
// dropout and the product with v; a dropout probability of 0 leaves it as it is.
const char* kAttention = R"(
def forward(self, x):
    q = x * 0.5
    a = torch.scaled_dot_product_attention(q, x, x, None, 0.5, True)
    b = torch.scaled_dot_product_attention(q, x, x, None, 0.0, False)
    return a + b
)";

TEST(KeyedRandom, AttentionDropoutBecomesSoftmaxKeyedDropoutAndProduct) {
  const ModelGraph graph = captureModel(scripted(kAttention));
  EXPECT_EQ(countKind(graph.graph->block(), "aten::scaled_dot_product_attention"), 1);  // p = 0
  EXPECT_EQ(countKind(graph.graph->block(), "ppstage::attention_probs"), 1);
  EXPECT_EQ(countKind(graph.graph->block(), "ppstage::dropout"), 1);
  const at::Tensor x = at::randn({2, 3, 6, 4});
  at::manual_seed(1);
  const at::Tensor first = runWith(graph, x, {7, 3, 2});
  at::manual_seed(2);
  EXPECT_TRUE(at::equal(runWith(graph, x, {7, 3, 2}), first));
  EXPECT_FALSE(at::equal(runWith(graph, x, {7, 3, 1}), first));  // another micro-batch
}

// Arguments named like a dropout probability that are ints or None are not one (norm's p).
TEST(KeyedRandom, OpsWithAnotherKindOfPAreLeftAlone) {
  const ModelGraph graph = captureModel(scripted(R"(
def forward(self, x):
    return x * torch.norm(x, 2) + torch.dropout(x, 0.0, True)
)"));
  EXPECT_EQ(countKind(graph.graph->block(), "ppstage::keyed_generator"), 0);
  EXPECT_EQ(countKind(graph.graph->block(), "aten::norm"), 1);
}

// ppstage::attention_probs, then the product with v, is what scaled_dot_product_attention
// computes, with every kind of mask.
TEST(KeyedRandom, AttentionProbsAreThoseOfScaledDotProductAttention) {
  captureModel(scripted(kAttention));  // registers ppstage's ops
  static const auto probs =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("ppstage::attention_probs", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&,
                            bool, c10::optional<double>)>();
  const at::Tensor q = at::randn({2, 4, 5, 8}), k = at::randn({2, 4, 7, 8}),
                   v = at::randn({2, 4, 7, 8});
  const at::Tensor bool_mask = at::rand({5, 7}) > 0.3;
  const at::Tensor float_mask = at::randn({2, 1, 5, 7});
  struct Case {
    c10::optional<at::Tensor> mask;
    bool causal;
    c10::optional<double> scale;
  };
  for (const Case& c :
       {Case{c10::nullopt, false, c10::nullopt}, Case{bool_mask, false, 0.3},
        Case{float_mask, false, c10::nullopt}, Case{c10::nullopt, true, c10::nullopt}}) {
    const at::Tensor want =
        at::scaled_dot_product_attention(q, k, v, c.mask, 0.0, c.causal, c.scale);
    const at::Tensor got = at::matmul(probs.call(q, k, c.mask, c.causal, c.scale), v);
    EXPECT_LE(test::maxRelDiff(got, want), 1e-5)
        << "causal " << c.causal << " mask " << c.mask.has_value() << " scale "
        << c.scale.has_value();
  }
}

}  // namespace
}  // namespace ppstage

namespace ppstage {
namespace {

// What the Device and tensor constants of `block` and its sub-blocks hold, by device.
void countConstantDevices(const torch::jit::Block* block, std::map<std::string, int>& count) {
  for (const torch::jit::Node* node : block->nodes()) {
    for (const torch::jit::Block* sub : node->blocks()) countConstantDevices(sub, count);
    if (node->kind() != c10::prim::Constant) continue;
    const auto value = torch::jit::toIValue(node->output());
    if (value && value->isDevice()) ++count["device " + value->toDevice().str()];
    if (value && value->isTensor() && value->toTensor().dim() > 0) {
      ++count["tensor " + value->toTensor().device().str()];
    }
  }
}

std::map<std::string, int> constantDevices(const torch::jit::Graph& graph) {
  std::map<std::string, int> count;
  countConstantDevices(graph.block(), count);
  return count;
}

// The traced GPT fixture builds its mask with device=torch.device("cpu"): every such
// constant is rewritten for the stage's device (meta here, a device this machine has
// without a GPU), and nothing is rewritten for the CPU.
TEST(DeviceConstants, ATracedGraphsDeviceConstantsFollowTheStage) {
  const ModelGraph captured = captureConfig(test::fixtureConfig("traced_gpt.pt"));
  const std::map<std::string, int> before = constantDevices(*captured.graph);
  ASSERT_GT(before.count("device cpu"), 0u);
  std::shared_ptr<torch::jit::Graph> graph = captured.graph->copy();
  EXPECT_EQ(moveConstantsTo(*graph, at::kCPU).devices, 0);
  const DeviceConstants moved = moveConstantsTo(*graph, at::Device(at::kMeta));
  EXPECT_EQ(moved.devices, before.at("device cpu"));
  const std::map<std::string, int> after = constantDevices(*graph);
  EXPECT_EQ(after.count("device cpu"), 0u);
  EXPECT_EQ(after.at("device meta"), before.at("device cpu"));
  EXPECT_EQ(after.count("tensor cpu"), 0u);
  graph->lint();
}

}  // namespace
}  // namespace ppstage
