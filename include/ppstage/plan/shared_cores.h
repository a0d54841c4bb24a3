// What the simulator needs of a job whose CPU ranks share cores (Note [Ranks that share
// cores] in src/schedule/action_costs.cpp): the threads each pipeline rank computes with on
// each machine, from the job's layout and its ranks' machines.
#pragma once

#include "ppstage/core/cpu_layout.h"
#include "ppstage/core/topology.h"
#include "ppstage/schedule/simulator.h"

namespace ppstage {

// `job`'s pipeline ranks on `cpus`' machines (one entry per world rank of `job`), their
// costs measured at `measured_share` of a core per thread (CostProfile::core_share).
// Empty, so that costs are durations, where `cpus` is empty or not of `job`'s ranks, the
// share is not known (0), or every machine has a core for each of its threads now as when
// measured.
SharedCores sharedCoresOf(const Topology& job, const CpuLayout& cpus, double measured_share);

}  // namespace ppstage
