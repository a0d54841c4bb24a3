// The machines a job's ranks run on and the cores they share there (Note [Ranks that share
// cores] in src/schedule/action_costs.cpp). A machine is one kernel: ranks in network
// namespaces or containers of one machine share its cores though they are different
// hosts to MPI (Topology's hosts).
#pragma once

#include <string>
#include <vector>

namespace ppstage {

struct CpuLayout {
  std::vector<int> machine_of_rank;  // per world rank; numbered from 0 by first rank
  std::vector<int> cores;            // per machine: its cores
  int threads_per_rank = 1;          // the intra-op threads each rank computes with

  bool empty() const { return machine_of_rank.empty(); }
  // The share of a core each thread of world rank `rank` has while every rank computes:
  // min(1, its machine's cores / the threads of its ranks).
  double shareOf(int rank) const;
  // shareOf's mean over the ranks (1 where empty).
  double meanShare() const;
  // The turn (from 0) in which each world rank measures the model's costs so that the
  // ranks measuring at once on a machine have a core per thread (one turn where the cores
  // suffice; one rank's group at a time where a group needs more). Groups of `group`
  // adjacent ranks (a tensor-parallel group, whose collectives measure together) share a
  // turn, by the machine of their first rank.
  std::vector<int> measuringTurns(int group) const;
  // The share of a core each thread had while measuring in `turns` (measuringTurns), the
  // mean over the ranks of min(1, the machine's cores / the threads measuring with it).
  double measuringShare(const std::vector<int>& turns) const;
};

// This machine: the kernel's boot id (/proc/sys/kernel/random/boot_id), which namespaces
// and containers on one machine share; its host name where that cannot be read.
std::string thisMachineId();
// This machine's cores (std::thread::hardware_concurrency, at least 1).
int coresOfThisMachine();
// The layout of ranks whose machines are `machine_ids` (one per world rank) with
// `cores` each (per world rank: its machine's), numbered by first rank.
CpuLayout cpuLayoutOf(const std::vector<std::string>& machine_ids, const std::vector<int>& cores,
                      int threads_per_rank);

}  // namespace ppstage
