// The stack `ppstage --version` reports is the one this binary was built with, loaded once:
// LibTorch (and, in a CUDA build, the CUDA runtime, cuDNN and NCCL) loaded at the version
// built against, from one file each.
#include "ppstage/core/software_stack.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include <iostream>
#include <stdexcept>
#include <string>

namespace ppstage {
namespace {

const StackComponent& component(const SoftwareStack& stack, const std::string& name) {
  for (const StackComponent& c : stack.components) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no component " + name);
}

TEST(SoftwareStack, VersionsDecodeAsTheirLibrariesWriteThem) {
  EXPECT_EQ(cudaVersionText(13000), "13.0");
  EXPECT_EQ(cudaVersionText(12080), "12.8");
  EXPECT_EQ(cudnnVersionText(91900), "9.19.0");  // cuDNN 9: major * 10000
  EXPECT_EQ(cudnnVersionText(8907), "8.9.7");    // cuDNN 8: major * 1000
  EXPECT_EQ(ncclVersionText(22809), "2.28.9");   // NCCL 2.9 on: major * 10000
  EXPECT_EQ(ncclVersionText(2804), "2.8.4");
}

TEST(SoftwareStack, LibTorchIsLoadedAtTheVersionBuiltAgainst) {
  const SoftwareStack stack = softwareStack();
  const StackComponent& torch = component(stack, "LibTorch");
  EXPECT_EQ(torch.built, TORCH_VERSION);
  EXPECT_EQ(torch.loaded, torch.built);
  EXPECT_NE(torch.file.find("libtorch_cpu.so"), std::string::npos) << torch.file;
  std::cout << describe(stack);
}

TEST(SoftwareStack, CudaAndNcclAreThoseBuiltAgainstOrSayWhyNot) {
  const SoftwareStack stack = softwareStack();
  const StackComponent& cuda = component(stack, "CUDA runtime");
  const StackComponent& nccl = component(stack, "NCCL");
#if PPSTAGE_WITH_CUDA
  // The runtime's major version is what the code was compiled for; minors may move on.
  EXPECT_EQ(cuda.loaded.substr(0, cuda.loaded.find('.')),
            cuda.built.substr(0, cuda.built.find('.')));
  const StackComponent& cudnn = component(stack, "cuDNN");
  EXPECT_EQ(cudnn.loaded.substr(0, cudnn.loaded.find('.')),
            cudnn.built.substr(0, cudnn.built.find('.')));
#else
  EXPECT_EQ(cuda.built, "-");
  EXPECT_EQ(stack.cuda_devices, 0);
#endif
#if PPSTAGE_WITH_NCCL
  EXPECT_EQ(nccl.loaded, nccl.built);
  EXPECT_NE(nccl.file.find("libnccl.so"), std::string::npos) << nccl.file;
  EXPECT_EQ(nccl.note, "") << "more than one NCCL loaded: " << nccl.note;
#else
  EXPECT_EQ(nccl.built, "-");
#endif
  if (stack.cuda_devices == 0) EXPECT_FALSE(stack.no_device_reason.empty());
}

}  // namespace
}  // namespace ppstage
