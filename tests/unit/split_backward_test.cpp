// The I/W split (compile/split_backward.h, Note [Eager I/W split]) against one backward:
// input gradients from I and weight gradients from W equal, bitwise, what one
// autograd::grad over inputs and weights computes, for a stage with a residual stream,
// layer norms, attention and a tied head (gpt's second stage), for a first stage whose
// input needs no gradient, and for a weight used twice on the input path; in compile
// modes none, stage and block.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/script.h>
#include <functional>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/compile/segments.h"
#include "ppstage/compile/split_backward.h"
#include "ppstage/models/model_source.h"
#include "ppstage/split/stage_module.h"
#include "support/split_model.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

using test::splitModel;
using test::SplitModel;
using test::trainableWeights;

// The loss of one forward of `stage` on `inputs` (fresh leaves each time).
at::Tensor forwardLoss(CompiledStage& compiled, const StageModule& stage,
                       const std::vector<at::Tensor>& inputs) {
  const at::Tensor out = compiled.run(stage.arguments(inputs)).at(0).toTensor();
  return (out * out).mean();
}

// B: one autograd::grad over `inputs` and `weights`; I then W: the split. Equal, bitwise.
void expectSplitEqualsOneBackward(const std::function<at::Tensor()>& forward,
                                  const std::vector<at::Tensor>& inputs,
                                  const std::vector<at::Tensor>& weights, const std::string& what) {
  std::vector<at::Tensor> wrt(inputs);
  wrt.insert(wrt.end(), weights.begin(), weights.end());
  const at::Tensor loss = forward();
  const std::vector<at::Tensor> one = torch::autograd::grad({loss}, wrt, {at::ones_like(loss)});

  const at::Tensor again = forward();
  SplitBackward split;
  std::vector<at::Tensor> two =
      split.inputGradients({again}, {at::ones_like(again)}, inputs, weights);
  const std::vector<at::Tensor> w = split.weightGradients();
  two.insert(two.end(), w.begin(), w.end());
  ASSERT_EQ(two.size(), one.size()) << what;
  for (size_t i = 0; i < one.size(); ++i) {
    const std::string name = i < inputs.size() ? "input " + std::to_string(i)
                                               : "weight " + std::to_string(i - inputs.size());
    ASSERT_TRUE(two[i].defined()) << what << ": " << name;
    EXPECT_TRUE(at::equal(two[i], one[i]))
        << what << ": " << name << " differs by " << test::maxRelDiff(two[i], one[i]);
  }
}

// Stage `index` of gpt (4 layers, tied) cut in two, compiled in `mode`; stage 1's input is
// stage 0's output, as a received activation.
void checkGptStage(int index, CompileMode mode) {
  Config config = test::builtinConfig("gpt", 4, /*tie_embeddings=*/true);
  SplitModel s = splitModel(loadModel(config.model, config.train), 2, 2);
  const at::Tensor tokens = makeExampleInput(s.model.input, 2, 1);
  CompileCache none_cache(CompileMode::kNone), cache(mode);
  std::vector<at::Tensor> inputs{tokens};
  if (index == 1) {
    CompiledStage first(s.stages[0].graph, s.stages[0].inputs.size(), none_cache, "stage 0");
    inputs = {
        first.run(s.stages[0].arguments({tokens})).at(0).toTensor().detach().requires_grad_(true)};
  }
  const StageModule& stage = s.stages[static_cast<size_t>(index)];
  const std::vector<GraphSegment> segments =
      mode == CompileMode::kBlock
          ? segmentStage(*stage.graph, stage.node_call, s.graph, findBlocks(s.graph, ""))
          : std::vector<GraphSegment>{};
  CompiledStage compiled(stage.graph, stage.inputs.size(), cache, "gpt stage", segments);
  const std::string what = "gpt stage " + std::to_string(index) + ", compile " + toString(mode);
  const auto forward = [&] { return forwardLoss(compiled, stage, inputs); };
  const std::vector<at::Tensor> weights = trainableWeights(stage);
  for (int warm = 0; warm < 3; ++warm) {  // profiling executors optimize after their first runs
    torch::autograd::grad({forward()}, weights);
  }
  // Stage 0's tokens need no gradient: I has nothing to do and W does all of it.
  expectSplitEqualsOneBackward(forward, index == 0 ? std::vector<at::Tensor>{} : inputs, weights,
                               what);
}

// A weight on the input path three times (as in a recurrent layer): three frontier nodes
// whose gradients meet at the weight in W as in one backward.
TEST(SplitBackward, AWeightUsedThreeTimes) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  const at::Tensor w = at::randn({8, 8}).mul_(0.3).requires_grad_(true);
  const at::Tensor b = at::randn({8}).requires_grad_(true);
  const auto forward = [&] {
    at::Tensor h = x;
    for (int t = 0; t < 3; ++t) h = at::tanh(at::addmm(b, h, w));
    return (h * h).sum();
  };
  expectSplitEqualsOneBackward(forward, {x}, {w, b}, "a weight used three times");
}

// Several roots: one computed from another, one outside I's region (it depends on a
// weight only), one an input itself, with gradients flowing into each.
TEST(SplitBackward, SeveralRootsOneOutsideTheInputsRegion) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  const at::Tensor w1 = at::randn({8, 8}).requires_grad_(true);
  const at::Tensor w2 = at::randn({8, 3}).requires_grad_(true);
  std::vector<at::Tensor> grads{at::randn({4, 8}), at::randn({4, 3}), at::randn({3})};
  const auto roots = [&] {
    const at::Tensor a = x.mm(w1);
    return std::vector<at::Tensor>{a, at::tanh(a).mm(w2), (w2 * w2).sum(0), x};
  };
  grads.push_back(at::randn({4, 8}));  // x itself is a root: an input passed through
  const std::vector<at::Tensor> one = torch::autograd::grad(roots(), {x, w1, w2}, grads);
  SplitBackward split;
  std::vector<at::Tensor> two = split.inputGradients(roots(), grads, {x}, {w1, w2});
  const std::vector<at::Tensor> w = split.weightGradients();
  two.insert(two.end(), w.begin(), w.end());
  ASSERT_EQ(two.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(two[i], one[i])) << "gradient " << i;
}

// Every stage of a Hugging Face GPT-2 (a TorchScript fixture) cut into 8, the inputs
// coming from the stages before it: with 8 stages some pass an input straight through.
TEST(SplitBackward, EveryStageOfAGpt2CutInEight) {
  const Config config = test::fixtureConfig("hf_gpt2.pt");
  SplitModel s = splitModel(loadModel(config.model, config.train), 8, 2);
  CompileCache cache(CompileMode::kNone);
  std::vector<at::Tensor> values{makeExampleInput(s.model.input, 2, 1)};
  for (const StageModule& stage : s.stages) {
    CompiledStage compiled(stage.graph, stage.inputs.size(), cache, "gpt2 stage");
    std::vector<at::Tensor> inputs, with_grad;
    for (size_t i = 0; i < values.size(); ++i) {
      inputs.push_back(values[i].detach());
      if (stage.inputs.at(i).meta.requires_grad)
        with_grad.push_back(inputs.back().requires_grad_(true));
    }
    // As the executor runs it: every output that requires grad is a root, with a gradient
    // of its own (as received from the next stage).
    const auto roots = [&] {
      std::vector<at::Tensor> out;
      for (const c10::IValue& v : compiled.run(stage.arguments(inputs))) {
        if (v.toTensor().requires_grad()) out.push_back(v.toTensor());
      }
      return out;
    };
    const std::vector<at::Tensor> weights = trainableWeights(stage);
    std::vector<at::Tensor> grads;
    for (const at::Tensor& r : roots()) grads.push_back(at::randn_like(r));
    std::vector<at::Tensor> wrt(with_grad);
    wrt.insert(wrt.end(), weights.begin(), weights.end());
    const std::vector<at::Tensor> one =
        torch::autograd::grad(roots(), wrt, grads, false, false, /*allow_unused=*/true);
    SplitBackward split;
    std::vector<at::Tensor> two = split.inputGradients(roots(), grads, with_grad, weights);
    const std::vector<at::Tensor> w = split.weightGradients();
    two.insert(two.end(), w.begin(), w.end());
    ASSERT_EQ(two.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_EQ(two[i].defined(), one[i].defined()) << "stage " << stage.index << " gradient " << i;
      if (one[i].defined()) {
        EXPECT_TRUE(at::equal(two[i], one[i]))
            << "stage " << stage.index << " gradient " << i << " (of " << with_grad.size()
            << " inputs) differs by " << test::maxRelDiff(two[i], one[i]);
      }
    }
    values.clear();
    for (const c10::IValue& out : compiled.run(stage.arguments(inputs))) {
      values.push_back(out.toTensor().detach());
    }
  }
}

// How many aten::mm calls this thread makes while `run` runs (RecordFunction observes every
// op the dispatcher runs, JIT executors' included).
int64_t matrixProducts(const std::function<void()>& run) {
  static thread_local int64_t count = 0;
  count = 0;
  const at::CallbackHandle handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (std::string(fn.name()) == "aten::mm") ++count;
        return nullptr;
      }));
  run();
  at::removeCallback(handle);
  return count;
}

// Two matrix products, tanh between: one backward runs four products (each product's
// activation and weight gradients). The split's I must run only the two activation ones
// and W only the two weight ones, in every compile mode: an I/W split that costs one B.
// In stage mode this is the compiled split (Note [Compiled backward and the I/W split]):
// the product's gradient section is cut in two.
TEST(SplitBackward, IAndWRunOnlyTheirOwnMatrixProducts) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
    graph(%x : Tensor, %w1 : Tensor, %w2 : Tensor):
      %h : Tensor = aten::mm(%x, %w1)
      %a : Tensor = aten::tanh(%h)
      %y : Tensor = aten::mm(%a, %w2)
      return (%y))IR",
                      graph.get());
  at::manual_seed(2);
  const at::Tensor x = at::randn({8, 16}).requires_grad_(true);
  const at::Tensor w1 = at::randn({16, 16}).mul_(0.2).requires_grad_(true);
  const at::Tensor w2 = at::randn({16, 4}).requires_grad_(true);
  for (CompileMode mode : {CompileMode::kNone, CompileMode::kStage}) {
    CompileCache cache(mode);
    CompiledStage compiled(graph, 1, cache, "mlp");
    const auto forward = [&] {
      const at::Tensor y = compiled.run({x, w1, w2}).at(0).toTensor();
      return (y * y).sum();
    };
    for (int warm = 0; warm < 3; ++warm) torch::autograd::grad({forward()}, {x, w1, w2});
    const at::Tensor loss = forward();
    std::vector<at::Tensor> one;
    const int64_t b = matrixProducts([&] { one = torch::autograd::grad({loss}, {x, w1, w2}); });
    const at::Tensor again = forward();
    SplitBackward split;
    std::vector<at::Tensor> two, w;
    const int64_t i = matrixProducts([&] {
      two = split.inputGradients({again}, {at::ones_like(again)}, {x}, {w1, w2});
    });
    const int64_t wp = matrixProducts([&] { w = split.weightGradients(); });
    EXPECT_EQ(b, 4) << toString(mode);
    EXPECT_EQ(i, 2) << toString(mode) << ": I runs " << i << " products";
    EXPECT_EQ(wp, 2) << toString(mode) << ": W runs " << wp << " products";
    two.insert(two.end(), w.begin(), w.end());
    for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(at::equal(two[k], one[k])) << toString(mode) << k;
  }
}

// A weight reaching a compiled region through ops left outside it (chunk, then a list
// unpack, which has no symbolic gradient): the region has no weights of its own, and its
// I node, on the frontier, gives the weight's gradient in W, from what it computed in I.
TEST(SplitBackward, AWeightThroughEagerOpsIntoACompiledRegion) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
    graph(%x : Tensor, %w : Tensor):
      %two : int = prim::Constant[value=2]()
      %one : int = prim::Constant[value=1]()
      %parts : Tensor[] = aten::chunk(%w, %two, %one)
      %a : Tensor, %b : Tensor = prim::ListUnpack(%parts)
      %h : Tensor = aten::mm(%x, %a)
      %t : Tensor = aten::tanh(%h)
      %y : Tensor = aten::mm(%t, %b)
      return (%y))IR",
                      graph.get());
  at::manual_seed(3);
  const at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  const at::Tensor w = at::randn({8, 16}).mul_(0.3).requires_grad_(true);
  for (CompileMode mode : {CompileMode::kNone, CompileMode::kStage}) {
    CompileCache cache(mode);
    CompiledStage compiled(graph, 1, cache, "chunked");
    const auto forward = [&] {
      const at::Tensor y = compiled.run({x, w}).at(0).toTensor();
      return (y * y).sum();
    };
    for (int warm = 0; warm < 3; ++warm) torch::autograd::grad({forward()}, {x, w});
    expectSplitEqualsOneBackward(forward, {x}, {w},
                                 std::string("chunked weight, ") + toString(mode));
  }
}

TEST(SplitBackward, GptStagesInEveryCompileMode) {
  for (CompileMode mode : {CompileMode::kNone, CompileMode::kStage, CompileMode::kBlock}) {
    checkGptStage(1, mode);
    checkGptStage(0, mode);
  }
}

}  // namespace
}  // namespace ppstage
