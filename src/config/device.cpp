// See include/ppstage/config/device.h.
#include "ppstage/config/device.h"

#include <cctype>

#include "ppstage/core/environment.h"
#include "ppstage/core/error.h"
#include "ppstage/core/software_stack.h"

namespace ppstage {
namespace {

// -1 for "cuda" (the local rank's), N for "cuda:N"; throws for anything else but "cpu",
// which gives -2.
int parseDevice(const std::string& device) {
  if (device == "cpu") return -2;
  if (device == "cuda") return -1;
  const std::string prefix = "cuda:";
  const std::string digits = device.rfind(prefix, 0) == 0 ? device.substr(prefix.size()) : "";
  bool number = !digits.empty() && digits.size() <= 4;
  for (const char c : digits) number = number && std::isdigit(static_cast<unsigned char>(c));
  PPSTAGE_CHECK(number, "--train.device must be cpu, cuda or cuda:N (N a GPU's index); got '",
                device, "'");
  return std::stoi(digits);
}

std::string gpusText(int gpus) {
  return detail::concat(gpus, gpus == 1 ? " CUDA device" : " CUDA devices", " (cuda:0",
                        gpus > 1 ? detail::concat(" to cuda:", gpus - 1) : std::string(), ")");
}

}  // namespace

DeviceFacts thisHost() {
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
}

std::string RankDevice::text() const {
  return cuda() ? detail::concat("cuda:", cuda_index) : std::string("cpu");
}

RankDevice resolveDevice(const std::string& device, CommBackend backend, const DeviceFacts& facts) {
  const int index = parseDevice(device);
  RankDevice out;
  if (index == -2) {
    PPSTAGE_CHECK(backend != CommBackend::kNccl,
                  "--comm.backend nccl carries CUDA tensors; with --train.device cpu use "
                  "--comm.backend mpi (or auto), or train on GPUs with --train.device cuda");
    return out;
  }
  PPSTAGE_CHECK(facts.gpus > 0, "--train.device ", device, ": no CUDA device is visible",
                facts.no_gpu_reason.empty() ? "" : " (" + facts.no_gpu_reason + ")",
                "; use --train.device cpu");
  PPSTAGE_CHECK(index < facts.gpus, "--train.device ", device, ": this host shows ",
                gpusText(facts.gpus));
  out.backend = backend == CommBackend::kAuto ? CommBackend::kNccl : backend;
  PPSTAGE_CHECK(out.backend != CommBackend::kNccl || facts.nccl,
                "this ppstage was built without NCCL (see ppstage --version); use "
                "--comm.backend mpi, which stages CUDA tensors through host memory");
  // The GPU of each local rank; ranks beyond the GPUs share them, round robin.
  out.cuda_index = index >= 0 ? index : facts.local_rank % facts.gpus;
  const bool shared = index >= 0 ? facts.local_ranks > 1 : facts.local_ranks > facts.gpus;
  PPSTAGE_CHECK(out.backend != CommBackend::kNccl || !shared, "--train.device ", device,
                " with NCCL", backend == CommBackend::kAuto ? " (--comm.backend auto)" : "", ": ",
                facts.local_ranks, " ranks on this host would share ",
                index >= 0 ? detail::concat("cuda:", index) : gpusText(facts.gpus),
                ", and NCCL needs a GPU per rank; start at most ", index >= 0 ? 1 : facts.gpus,
                " per host, or use --comm.backend mpi (slower: "
                "through host memory)");
  return out;
}

}  // namespace ppstage
