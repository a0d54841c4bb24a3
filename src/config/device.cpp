// See include/ppstage/config/device.h.
#include "ppstage/config/device.h"

#include <cctype>
#include <optional>

#include "ppstage/core/environment.h"
#include "ppstage/core/error.h"
#include "ppstage/core/software_stack.h"

namespace ppstage {
namespace {

// What --train.device names.
struct NamedDevice {
  bool cuda = false;
  std::optional<int> index;  // cuda:N's N; empty for cuda (the local rank's GPU)
};

// Throws for anything but cpu, cuda and cuda:N.
NamedDevice parseDevice(const std::string& device) {
  if (device == "cpu") return {};
  if (device == "cuda") return {true, std::nullopt};
  const std::string prefix = "cuda:";
  const std::string digits = device.rfind(prefix, 0) == 0 ? device.substr(prefix.size()) : "";
  bool number = !digits.empty() && digits.size() <= 4;
  for (const char c : digits) number = number && std::isdigit(static_cast<unsigned char>(c));
  PPSTAGE_CHECK(number, "--train.device must be cpu, cuda or cuda:N (N a GPU's index); got '",
                device, "'");
  return {true, std::stoi(digits)};
}

std::string gpusText(int gpus) {
  return detail::concat(gpus, gpus == 1 ? " CUDA device" : " CUDA devices", " (cuda:0",
                        gpus > 1 ? detail::concat(" to cuda:", gpus - 1) : std::string(), ")");
}

}  // namespace

DeviceFacts thisHost() {
  // What a process sees does not change, and CUDA's device query is slow: asked once.
  static const DeviceFacts host = [] {
    DeviceFacts facts;
    const SoftwareStack stack = softwareStack();
    facts.gpus = stack.cuda_devices;
    facts.no_gpu_reason = stack.no_device_reason;
    facts.local_rank = environment::localRank().value_or(0);
    facts.local_ranks = environment::localRanks().value_or(1);
#ifdef PPSTAGE_WITH_NCCL
    facts.nccl = true;
#endif
    return facts;
  }();
  return host;
}

std::string RankDevice::text() const {
  return cuda() ? detail::concat("cuda:", cuda_index) : std::string("cpu");
}

RankDevice resolveDevice(const std::string& device, CommBackend backend, const DeviceFacts& facts) {
  const NamedDevice named = parseDevice(device);
  RankDevice out;
  if (!named.cuda) {
    PPSTAGE_CHECK(backend != CommBackend::kNccl,
                  "--comm.backend nccl carries CUDA tensors; with --train.device cpu use "
                  "--comm.backend mpi (or auto), or train on GPUs with --train.device cuda");
    return out;
  }
  PPSTAGE_CHECK(facts.gpus > 0, "--train.device ", device, ": no CUDA device is visible",
                facts.no_gpu_reason.empty() ? "" : " (" + facts.no_gpu_reason + ")",
                "; use --train.device cpu");
  PPSTAGE_CHECK(named.index.value_or(0) < facts.gpus, "--train.device ", device,
                ": this host shows ", gpusText(facts.gpus));
  out.backend = backend == CommBackend::kAuto ? CommBackend::kNccl : backend;
  PPSTAGE_CHECK(out.backend != CommBackend::kNccl || facts.nccl,
                "this ppstage was built without NCCL (see ppstage --version); use "
                "--comm.backend mpi, which stages CUDA tensors through host memory");
  // The GPU of each local rank; ranks beyond the GPUs share them, round robin.
  out.cuda_index = named.index.value_or(facts.local_rank % facts.gpus);
  const bool shared = named.index ? facts.local_ranks > 1 : facts.local_ranks > facts.gpus;
  PPSTAGE_CHECK(out.backend != CommBackend::kNccl || !shared, "--train.device ", device,
                " with NCCL", backend == CommBackend::kAuto ? " (--comm.backend auto)" : "", ": ",
                facts.local_ranks, " ranks on this host would share ",
                named.index ? detail::concat("cuda:", *named.index) : gpusText(facts.gpus),
                ", and NCCL needs a GPU per rank; start at most ", named.index ? 1 : facts.gpus,
                " per host, or use --comm.backend mpi (slower: "
                "through host memory)");
  return out;
}

}  // namespace ppstage
