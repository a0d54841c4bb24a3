// Training on a GPU (built with a CUDA LibTorch; every test skips without a CUDA device):
// stages placed on cuda:0 against the CPU and against one GPU, four stages of one rank in
// every compile mode, the fused optimizer, files written from CUDA tensors. (A traced
// model's device constants: tests/unit/capture_test.cpp, on the meta device.) Ranks are threads of
// one process (LocalGroup), so two ranks share cuda:0 as --comm.backend mpi lets them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/optim/adamw.h>

#include <cstdlib>
#include <sstream>

#include "ppstage/comm/local_communicator.h"
#include "ppstage/core/software_stack.h"
#include "ppstage/core/torch_save.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/observe/tensor_memory.h"
#include "ppstage/runtime/fused_adamw.h"
#include "ppstage/train/trainer.h"
#include "support/local_ranks.h"
#include "support/test_support.h"

namespace ppstage {
namespace {

// The check's rehearsal (scripts/gpu/check.sh with PPSTAGE_GPU_REHEARSAL=1): every run
// below on the CPU (--train.device cpu), so that what the check asserts is seen to hold
// before a GPU's minutes are spent on it. Fusion is not asserted there: TorchScript fuses
// nothing on the CPU.
bool rehearsal() {
  const char* value = std::getenv("PPSTAGE_GPU_REHEARSAL");
  return value != nullptr && std::string(value) == "1";
}

std::string deviceName() { return rehearsal() ? "cpu" : "cuda:0"; }
at::Device device() { return rehearsal() ? at::Device(at::kCPU) : at::Device(at::kCUDA, 0); }

class GpuTest : public testing::Test {
 protected:
  void SetUp() override {
    const SoftwareStack stack = softwareStack();
    if (stack.cuda_devices < 1 && !rehearsal())
      GTEST_SKIP() << "no CUDA device visible: " << stack.no_device_reason;
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
    installCountingAllocator();  // as `ppstage train` does: the rehearsal's memory figures
  }
};

RunMetrics trainMetrics(const Config& config, int ranks) {
  RunMetrics out;
  test::runRanks(ranks, [&](int rank, Communicator& comm) {
    std::ostringstream log;
    RunMetrics metrics = train(config, comm, log);
    if (rank == 0) out = std::move(metrics);
  });
  return out;
}

std::vector<double> trainLosses(const Config& config, int ranks) {
  return trainMetrics(config, ranks).losses;
}

Config smallGpt(const std::string& device) {
  Config config = test::builtinConfig("gpt", 4, /*tie_embeddings=*/true);
  config.train.steps = 3;
  config.train.threads = 1;
  config.train.device = device;
  config.comm.backend = CommBackend::kMpi;  // ranks as threads share cuda:0
  config.data.path = "synthetic";
  config.output.log_every = 0;
  return config;
}

// Two stages on two ranks sharing cuda:0 against one stage on it (1e-5, fp32), and against
// the CPU within a looser bound: GPU kernels sum in another order. Rank 0 reports the
// device's tensor memory: its activations, and more than them at peak.
TEST_F(GpuTest, PipelinedOnOneGpuMatchesOneStageOnItAndTheCpu) {
  Config one = smallGpt(deviceName());
  one.pipeline.stages = 1;
  one.pipeline.microbatches = 4;
  const std::vector<double> reference = trainLosses(one, 1);
  Config two = smallGpt(deviceName());
  two.pipeline.stages = 2;
  two.pipeline.microbatches = 4;
  const RunMetrics metrics = trainMetrics(two, 2);
  const std::vector<double>& pipelined = metrics.losses;
  Config cpu = one;
  cpu.train.device = "cpu";
  const std::vector<double> on_cpu = trainLosses(cpu, 1);
  ASSERT_EQ(reference.size(), 3u);
  ASSERT_EQ(pipelined.size(), 3u);
  const RankMetrics& rank0 = metrics.ranks.at(0);
  EXPECT_GT(rank0.peak_activation_mb, 0);
  EXPECT_GT(rank0.peak_allocated_mb, rank0.peak_activation_mb);
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_NEAR(pipelined[i], reference[i], 1e-5 * std::abs(reference[i])) << i;
    EXPECT_NEAR(on_cpu[i], reference[i], 1e-3 * std::abs(reference[i])) << i;
  }
}

// Four stages on one rank's GPU (the local path between them), in every compile mode,
// against one stage on it: 1e-5 in fp32. TorchScript fuses on CUDA (NNC through NVRTC),
// so stage and block report fusion groups.
TEST_F(GpuTest, FourStagesOnOneGpuMatchOneStageInEveryCompileMode) {
  Config one = smallGpt(deviceName());
  one.pipeline.stages = 1;
  one.pipeline.microbatches = 4;
  const std::vector<double> reference = trainLosses(one, 1);
  for (const CompileMode mode : {CompileMode::kNone, CompileMode::kStage, CompileMode::kBlock}) {
    Config four = smallGpt(deviceName());
    four.pipeline.stages = 4;
    four.pipeline.schedule = "gpipe";
    four.pipeline.microbatches = 4;
    four.compile.mode = mode;
    const RunMetrics metrics = trainMetrics(four, 1);
    SCOPED_TRACE(toString(mode));
    ASSERT_EQ(metrics.losses.size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_NEAR(metrics.losses[i], reference[i], 1e-5 * std::abs(reference[i])) << i;
    }
    if (mode != CompileMode::kNone && !rehearsal()) EXPECT_GT(metrics.compile.fusion_groups, 0);
  }
}

// A GPU's tensor memory (the step line's, the metrics' peaks) is the CUDA caching allocator's
// allocated bytes: exact for sizes that are whole blocks of it (512 bytes), and the peak
// starts over at a reset. In the rehearsal, the counting CPU allocator's.
TEST_F(GpuTest, TensorMemoryIsTheAllocatorsBytesOnTheDevice) {
  const at::Device where = device();
  const at::TensorOptions floats = at::TensorOptions(where).dtype(at::kFloat);
  const int64_t before = tensorBytesNow(where);
  resetTensorBytesPeak(where);
  {
    const at::Tensor kept = at::empty({1 << 20}, floats);  // 4 MiB
    EXPECT_EQ(tensorBytesNow(where) - before, int64_t{4} << 20);
    { const at::Tensor freed = at::empty({1 << 18}, floats); }  // 1 MiB, freed at once
    EXPECT_EQ(tensorBytesNow(where) - before, int64_t{4} << 20);
    EXPECT_EQ(tensorBytesPeak(where) - before, int64_t{5} << 20);
    resetTensorBytesPeak(where);
    EXPECT_EQ(tensorBytesPeak(where) - before, int64_t{4} << 20);
  }
  EXPECT_EQ(tensorBytesNow(where), before);
}

TEST_F(GpuTest, FusedAdamWOnCudaStepsAsTorchOptimAdamW) {
  at::manual_seed(0);
  const at::Tensor start = at::randn({64, 33});
  at::Tensor fast = start.to(device()).requires_grad_(true);
  at::Tensor slow = start.to(device()).requires_grad_(true);
  const auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.1);
  FusedAdamW fused({fast}, options);
  torch::optim::AdamW reference({slow}, options);
  for (int step = 0; step < 5; ++step) {
    const at::Tensor g = at::randn({64, 33}).to(device());
    fast.mutable_grad() = g.clone();
    slow.mutable_grad() = g.clone();
    fused.step();
    reference.step();
  }
  EXPECT_LT(test::maxRelDiff(fast.detach().cpu(), slow.detach().cpu()), 1e-6);
}

TEST_F(GpuTest, AFileWrittenFromCudaTensorsLoadsOnTheCpu) {
  c10::Dict<std::string, at::Tensor> dict;
  const at::Tensor value = at::arange(12, at::kFloat).view({3, 4});
  dict.insert("w", value.to(device()));
  const std::string bytes = torchSaveBytes(c10::IValue(dict));
  const c10::IValue loaded = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  const at::Tensor back = loaded.toGenericDict().at("w").toTensor();
  EXPECT_TRUE(back.is_cpu());
  EXPECT_TRUE(at::equal(back, value));
}

}  // namespace
}  // namespace ppstage
