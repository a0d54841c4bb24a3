// See include/ppstage/core/software_stack.h. The CUDA parts are compiled where LibTorch has
// CUDA (PPSTAGE_WITH_CUDA), the NCCL ones where the NCCL communicator is (PPSTAGE_WITH_NCCL).
#include "ppstage/core/software_stack.h"

#include <ATen/Version.h>
#include <link.h>
#include <torch/version.h>

#include <cstring>
#include <sstream>

#if PPSTAGE_WITH_CUDA
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#endif
#if PPSTAGE_WITH_NCCL
#include <nccl.h>
#endif

namespace ppstage {

namespace {

constexpr const char* kNone = "-";

// The file of the first loaded shared object whose name contains `stem` ("libnccl.so"), or
// "" when none is loaded; `count` gets how many are.
std::string loadedLibrary(const char* stem, int* count = nullptr) {
  struct Search {
    const char* stem;
    std::string first;
    int count = 0;
  } search{stem, "", 0};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, s->stem) == nullptr) {
          return 0;
        }
        if (s->count++ == 0) s->first = info->dlpi_name;
        return 0;
      },
      &search);
  if (count != nullptr) *count = search.count;
  return search.first;
}

// LibTorch's own build settings name its version: "..., TORCH_VERSION=2.11.0, ...".
std::string loadedTorchVersion() {
  const std::string config = at::show_config();
  const std::string key = "TORCH_VERSION=";
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const size_t begin = at + key.size();
  return config.substr(begin, config.find_first_of(", \n", begin) - begin);
}

#if PPSTAGE_WITH_CUDA
void addCuda(SoftwareStack& stack) {
  int runtime = 0;
  int driver = 0;
  const bool have_runtime = cudaRuntimeGetVersion(&runtime) == cudaSuccess;
  cudaDriverGetVersion(&driver);  // 0 without a driver
  stack.components.push_back({"CUDA runtime", cudaVersionText(CUDART_VERSION),
                              have_runtime ? cudaVersionText(runtime) : kNone,
                              loadedLibrary("libcudart.so"),
                              driver > 0 ? "driver " + cudaVersionText(driver) : "no CUDA driver"});
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  const bool cudnn = hooks.compiledWithCuDNN();
  stack.components.push_back({"cuDNN", cudnn ? cudnnVersionText(hooks.versionCuDNN()) : kNone,
                              cudnn ? cudnnVersionText(hooks.versionRuntimeCuDNN()) : kNone,
                              loadedLibrary("libcudnn.so"), "built against by LibTorch"});
  const cudaError_t error = cudaGetDeviceCount(&stack.cuda_devices);
  if (error != cudaSuccess) {
    stack.cuda_devices = 0;
    stack.no_device_reason = cudaGetErrorString(error);
  }
}
#else
void addCuda(SoftwareStack& stack) {
  stack.components.push_back({"CUDA runtime", kNone, kNone, "", "LibTorch built without CUDA"});
  stack.no_device_reason = "LibTorch built without CUDA";
}
#endif

#if PPSTAGE_WITH_NCCL
void addNccl(SoftwareStack& stack) {
  int loaded = 0;
  ncclGetVersion(&loaded);
  int copies = 0;
  const std::string file = loadedLibrary("libnccl.so", &copies);
  stack.components.push_back({"NCCL", ncclVersionText(NCCL_VERSION_CODE), ncclVersionText(loaded),
                              file,
                              copies > 1 ? std::to_string(copies) + " NCCL libraries loaded" : ""});
}
#else
void addNccl(SoftwareStack& stack) {
  stack.components.push_back({"NCCL", kNone, kNone, "", "the NCCL communicator is not built"});
}
#endif

}  // namespace

std::string cudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string cudnnVersionText(long version) {
  const long major_unit = version >= 90000 ? 10000 : 1000;  // cuDNN 9 widened the minor
  return std::to_string(version / major_unit) + "." + std::to_string(version % major_unit / 100) +
         "." + std::to_string(version % 100);
}

std::string ncclVersionText(int version) {
  const int major_unit = version >= 10000 ? 10000 : 1000;  // NCCL 2.9 widened the minor
  return std::to_string(version / major_unit) + "." + std::to_string(version % major_unit / 100) +
         "." + std::to_string(version % 100);
}

SoftwareStack softwareStack() {
  SoftwareStack stack;
  stack.components.push_back(
      {"LibTorch", TORCH_VERSION, loadedTorchVersion(), loadedLibrary("libtorch_cpu.so"), ""});
  addCuda(stack);
  addNccl(stack);
  return stack;
}

std::string describe(const SoftwareStack& stack) {
  std::ostringstream out;
  auto padded = [](const std::string& text, size_t width) {
    return text + std::string(text.size() < width ? width - text.size() : 1, ' ');
  };
  out << "  " << padded("", 14) << padded("built against", 15) << padded("loaded", 10) << "from\n";
  for (const StackComponent& c : stack.components) {
    out << "  " << padded(c.name, 14) << padded(c.built, 15) << padded(c.loaded, 10) << c.file
        << (c.note.empty() || c.file.empty() ? "" : "; ") << c.note << "\n";
  }
  out << "  " << padded("CUDA devices", 14);
  if (stack.cuda_devices > 0) {
    out << stack.cuda_devices << " visible\n";
  } else {
    out << "none visible (" << stack.no_device_reason << ")\n";
  }
  return out.str();
}

}  // namespace ppstage
