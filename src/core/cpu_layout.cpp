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

std::vector<int> CpuLayout::measuringTurns(int group) const {
  group = std::max(group, 1);
  std::vector<int> turns(machine_of_rank.size(), 0);
  std::vector<int> groups_seen(cores.size(), 0);
  for (size_t first = 0; first < machine_of_rank.size(); first += static_cast<size_t>(group)) {
    const auto machine = static_cast<size_t>(machine_of_rank[first]);
    const int at_once = std::max(1, cores.at(machine) / (std::max(threads_per_rank, 1) * group));
    const int turn = groups_seen[machine]++ / at_once;
    const size_t end = std::min(machine_of_rank.size(), first + static_cast<size_t>(group));
    for (size_t r = first; r < end; ++r) turns[r] = turn;
  }
  return turns;
}

double CpuLayout::measuringShare(const std::vector<int>& turns) const {
  PPSTAGE_CHECK(turns.size() == machine_of_rank.size(), "turns of ", turns.size(),
                " ranks for a layout of ", machine_of_rank.size());
  if (empty()) return 1;
  double sum = 0;
  for (size_t r = 0; r < machine_of_rank.size(); ++r) {
    double together = 0;  // ranks on r's machine measuring in r's turn, r among them
    for (size_t o = 0; o < machine_of_rank.size(); ++o) {
      if (machine_of_rank[o] == machine_of_rank[r] && turns[o] == turns[r]) together += 1;
    }
    const double threads = together * std::max(threads_per_rank, 1);
    sum += std::min(1.0, cores.at(static_cast<size_t>(machine_of_rank[r])) / threads);
  }
  return sum / static_cast<double>(machine_of_rank.size());
}

std::string thisMachineId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  return "host " + thisHostName();
}

int coresOfThisMachine() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

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
