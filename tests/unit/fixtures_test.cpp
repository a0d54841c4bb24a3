// The committed TorchScript fixtures were saved by torch 1.13, but for those that torch 2.11
// scripts differently, saved by 2.11 (scripts/make_fixtures.py lists them). The LibTorch
// ppstage links loads every one of them and computes what 1.13 computed: references_1.13.0.pt
// holds, per model 1.13 can load, an example input and 1.13's output of forward in eval mode
// (`scripts/make_fixtures.py references` run by Debian's python3-torch 1.13; models whose
// forward draws random numbers even in eval mode, and two_inputs.pt, have none).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>

#include "support/test_support.h"

namespace ppstage {
namespace {

// "hf_gpt2.pt:input" -> tensor, as the references file holds them.
std::map<std::string, at::Tensor> readReferences(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& entry : torch::jit::pickle_load(bytes).toGenericDict()) {
    tensors[entry.key().toStringRef()] = entry.value().toTensor();
  }
  return tensors;
}

TEST(LoadedFixtures, EveryFixtureLoadsAndComputesWhatTorch113Computed) {
  const auto references = readReferences(test::fixturePath("references_1.13.0.pt"));
  std::vector<std::string> models = test::modelFixtures();
  models.push_back("hf_gpt2_loss.pt");
  models.push_back("data/small_resnet.pt");
  int compared = 0;
  for (const std::string& name : models) {
    torch::jit::Module model;
    ASSERT_NO_THROW(model = torch::jit::load(test::fixturePath(name))) << name;
    const auto input = references.find(name + ":input");
    if (input == references.end()) {
      std::cout << name << ": loads (no reference output)\n";
      continue;
    }
    model.eval();
    at::NoGradGuard no_grad;
    c10::IValue out = model.forward({input->second});
    const at::Tensor got =
        out.isTensor() ? out.toTensor() : out.toTupleRef().elements()[0].toTensor();
    const at::Tensor& want = references.at(name + ":output");
    ASSERT_EQ(got.sizes(), want.sizes()) << name;
    const double diff = test::maxRelDiff(got, want);
    std::cout << name << ": loads, output " << want.sizes() << " within " << diff << " of 1.13's\n";
    EXPECT_LE(diff, 1e-5) << name;
    ++compared;
  }
  EXPECT_EQ(static_cast<size_t>(compared), references.size() / 2);  // each one compared
}

}  // namespace
}  // namespace ppstage
