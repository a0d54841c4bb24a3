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
  std::string file = loadedLibrary("libcudart.so");
  file += driver > 0 ? "; driver " + cudaVersionText(driver) : "; no CUDA driver";
  stack.components.push_back({"CUDA runtime", cudaVersionText(CUDART_VERSION),
                              have_runtime ? cudaVersionText(runtime) : kNone, file});
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  const bool cudnn = hooks.compiledWithCuDNN();
  stack.components.push_back(
      {"cuDNN", cudnn ? cudnnVersionText(hooks.versionCuDNN()) + " (LibTorch's)" : kNone,
       cudnn ? cudnnVersionText(hooks.versionRuntimeCuDNN()) : kNone,
       loadedLibrary("libcudnn.so")});
  const cudaError_t error = cudaGetDeviceCount(&stack.cuda_devices);
  if (error != cudaSuccess) {
    stack.cuda_devices = 0;
    stack.no_device_reason = cudaGetErrorString(error);
  }
}
#else
void addCuda(SoftwareStack& stack) {
  stack.components.push_back({"CUDA runtime", kNone, kNone, "LibTorch built without CUDA"});
  stack.no_device_reason = "LibTorch built without CUDA";
}
#endif

#if PPSTAGE_WITH_NCCL
void addNccl(SoftwareStack& stack) {
  int loaded = 0;
  ncclGetVersion(&loaded);
  int copies = 0;
  std::string file = loadedLibrary("libnccl.so", &copies);
  if (copies > 1) file += " (and " + std::to_string(copies - 1) + " more: two NCCLs loaded)";
  stack.components.push_back(
      {"NCCL", ncclVersionText(NCCL_VERSION_CODE), ncclVersionText(loaded), file});
}
#else
void addNccl(SoftwareStack& stack) {
  stack.components.push_back({"NCCL", kNone, kNone, "the NCCL communicator is not built"});
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
  const std::string built = std::to_string(TORCH_VERSION_MAJOR) + "." +
                            std::to_string(TORCH_VERSION_MINOR) + "." +
                            std::to_string(TORCH_VERSION_PATCH);
  stack.components.push_back(
      {"LibTorch", built, loadedTorchVersion(), loadedLibrary("libtorch_cpu.so")});
  addCuda(stack);
  addNccl(stack);
  return stack;
}

std::string describe(const SoftwareStack& stack) {
  std::ostringstream out;
  auto row = [&](const std::string& a, const std::string& b, const std::string& c,
                 const std::string& d) {
    out << "  " << a << std::string(a.size() < 14 ? 14 - a.size() : 1, ' ') << b
        << std::string(b.size() < 22 ? 22 - b.size() : 1, ' ') << c
        << std::string(c.size() < 10 ? 10 - c.size() : 1, ' ') << d << "\n";
  };
  row("", "built against", "loaded", "from");
  for (const StackComponent& c : stack.components) row(c.name, c.built, c.loaded, c.file);
  out << "  CUDA devices  ";
  if (stack.cuda_devices > 0) {
    out << stack.cuda_devices << " visible\n";
  } else {
    out << "none visible (" << stack.no_device_reason << ")\n";
  }
  return out.str();
}

}  // namespace ppstage
