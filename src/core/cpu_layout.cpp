// See include/ppstage/core/cpu_layout.h.
#include "ppstage/core/cpu_layout.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include "ppstage/core/error.h"
#include "ppstage/core/host_name.h"

namespace ppstage {

double CpuLayout::shareOf(int rank) const {
  const int machine = machine_of_rank.at(static_cast<size_t>(rank));
  const auto ranks = std::count(machine_of_rank.begin(), machine_of_rank.end(), machine);
  const double threads = static_cast<double>(ranks) * std::max(threads_per_rank, 1);
  return std::min(1.0, cores.at(static_cast<size_t>(machine)) / threads);
}

double CpuLayout::meanShare() const {
  if (empty()) return 1;
  double sum = 0;
  for (size_t r = 0; r < machine_of_rank.size(); ++r) sum += shareOf(static_cast<int>(r));
  return sum / static_cast<double>(machine_of_rank.size());
}

std::string thisMachineId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  return "host " + thisHostName();
}

int coresOfThisMachine() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

CpuLayout cpuLayoutOf(const std::vector<std::string>& machine_ids, const std::vector<int>& cores,
                      int threads_per_rank) {
  PPSTAGE_CHECK(machine_ids.size() == cores.size(), "machines of ", machine_ids.size(),
                " ranks, cores of ", cores.size());
  CpuLayout out;
  out.threads_per_rank = threads_per_rank;
  std::vector<std::string> seen;
  for (size_t r = 0; r < machine_ids.size(); ++r) {
    auto at = std::find(seen.begin(), seen.end(), machine_ids[r]);
    if (at == seen.end()) {
      at = seen.insert(seen.end(), machine_ids[r]);
      out.cores.push_back(std::max(cores[r], 1));
    }
    out.machine_of_rank.push_back(static_cast<int>(at - seen.begin()));
  }
  return out;
}

}  // namespace ppstage
