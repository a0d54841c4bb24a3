// The optimizer (runtime/optimizer.h): FusedAdamW against torch::optim::AdamW, the state a
// checkpoint holds passed between them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include "ppstage/runtime/fused_adamw.h"
#include "ppstage/runtime/optimizer.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

std::vector<at::Tensor> leaves(int64_t seed) {
  at::manual_seed(seed);
  std::vector<at::Tensor> out;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{7, 5}, std::vector<int64_t>{5}, std::vector<int64_t>{3, 4, 2}}) {
    out.push_back(at::randn(shape).requires_grad_(true));
  }
  return out;
}

// Gives both sets the same random gradients; the second parameter gets none on odd steps.
void setGradients(std::vector<at::Tensor>& a, std::vector<at::Tensor>& b, int step) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (i == 1 && step % 2 == 1) {
      a[i].mutable_grad() = b[i].mutable_grad() = at::Tensor();
      continue;
    }
    const at::Tensor g = at::randn(a[i].sizes()) * (1.0 + step);
    a[i].mutable_grad() = g.clone();
    b[i].mutable_grad() = g.clone();
  }
}

TEST(FusedAdamW, StepsAsTorchOptimAdamWWithinFloatRounding) {
  std::vector<at::Tensor> fused = leaves(3), reference = leaves(3);
  const auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.1);
  FusedAdamW fast(fused, options);
  torch::optim::AdamW slow(reference, options);
  at::manual_seed(11);
  for (int step = 0; step < 6; ++step) {
    setGradients(fused, reference, step);
    fast.step();
    slow.step();
  }
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_LT(test::maxRelDiff(fused[i].detach(), reference[i].detach()), 1e-6) << i;
    const auto a = optimizerState(fast, fused[i]);
    const auto b = optimizerState(slow, reference[i]);
    ASSERT_EQ(a.size(), b.size()) << i;
    EXPECT_EQ(a.at("step").item<int64_t>(), b.at("step").item<int64_t>()) << i;
    EXPECT_EQ(a.at("step").item<int64_t>(), i == 1 ? 3 : 6) << i;
    EXPECT_LT(test::maxRelDiff(a.at("exp_avg"), b.at("exp_avg")), 1e-6) << i;
    EXPECT_LT(test::maxRelDiff(a.at("exp_avg_sq"), b.at("exp_avg_sq")), 1e-6) << i;
  }
  // The parameters moved: this compares updates, not untouched values.
  EXPECT_GT(test::maxRelDiff(fused[0].detach(), leaves(3)[0].detach()), 1e-3);
}

TEST(FusedAdamW, ResumesFromTorchOptimAdamWsState) {
  std::vector<at::Tensor> fused = leaves(5), reference = leaves(5);
  const auto options = torch::optim::AdamWOptions(3e-3).weight_decay(0.01);
  torch::optim::AdamW before(reference, options);
  at::manual_seed(2);
  for (int step = 0; step < 3; ++step) {
    setGradients(fused, reference, step);
    before.step();
  }
  FusedAdamW after(fused, options);
  for (size_t i = 0; i < fused.size(); ++i) {
    fused[i].detach().copy_(reference[i].detach());
    setOptimizerState(after, fused[i], optimizerState(before, reference[i]), "p");
  }
  for (int step = 3; step < 5; ++step) {
    setGradients(fused, reference, step);
    before.step();
    after.step();
  }
  for (size_t i = 0; i < fused.size(); ++i) {
    EXPECT_LT(test::maxRelDiff(fused[i].detach(), reference[i].detach()), 1e-6) << i;
  }
}

}  // namespace
}  // namespace ppstage
