// See include/ppstage/core/environment.h.
#include "ppstage/core/environment.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ppstage::environment {

bool underOpenMpi() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

std::optional<int> worldRanks() {
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (world == nullptr) return std::nullopt;
  return std::max(1, std::atoi(world));
}

bool requestTcpProgressThreadAcrossHosts() {
  constexpr const char* kName = "OMPI_MCA_btl_tcp_progress_thread";
  const std::optional<int> world = worldRanks(), local = localRanks();
  if (world && local && *local < *world) setenv(kName, "1", /*overwrite=*/0);
  const char* value = std::getenv(kName);
  return value != nullptr && std::string(value) == "1";
}

std::optional<int> localRanks() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local == nullptr) return std::nullopt;
  return std::max(1, std::atoi(local));
}

std::optional<int> localRank() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (local == nullptr) return std::nullopt;
  return std::max(0, std::atoi(local));
}

const char* checkpointFault() {
  static const char* fault = std::getenv("PPSTAGE_CHECKPOINT_FAULT");
  return fault;
}

}  // namespace ppstage::environment
