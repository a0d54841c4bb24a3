// See include/ppstage/core/environment.h.
#include "ppstage/core/environment.h"

#include <algorithm>
#include <cstdlib>

namespace ppstage::environment {

bool underOpenMpi() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

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
