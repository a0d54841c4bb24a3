// See include/ppstage/plan/shared_cores.h.
#include "ppstage/plan/shared_cores.h"

#include <numeric>

namespace ppstage {

SharedCores sharedCoresOf(const Topology& job, const CpuLayout& cpus, double measured_share) {
  if (cpus.empty() || measured_share <= 0 ||
      static_cast<int>(cpus.machine_of_rank.size()) != job.worldSize()) {
    return {};
  }
  SharedCores out;
  out.measured_share = measured_share;
  out.cores.assign(cpus.cores.begin(), cpus.cores.end());
  out.threads.assign(cpus.cores.size(), std::vector<double>(static_cast<size_t>(job.ppSize()), 0));
  for (int w = 0; w < job.worldSize(); ++w) {
    const auto machine = static_cast<size_t>(cpus.machine_of_rank[static_cast<size_t>(w)]);
    out.threads.at(machine)[static_cast<size_t>(job.ppRankOf(w))] += cpus.threads_per_rank;
  }
  bool crowded = measured_share < 1;
  for (size_t m = 0; m < out.cores.size(); ++m) {
    const double threads = std::accumulate(out.threads[m].begin(), out.threads[m].end(), 0.0);
    crowded = crowded || threads > out.cores[m];
  }
  return crowded ? out : SharedCores{};
}

}  // namespace ppstage
