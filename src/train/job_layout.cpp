// See job_layout.h.
#include "job_layout.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#ifdef PPSTAGE_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "ppstage/checkpoint/checkpoint_dir.h"
#include "ppstage/comm/mpi_session.h"
#include "ppstage/config/options.h"
#include "ppstage/core/compute_threads.h"
#include "ppstage/core/environment.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/observe/tensorboard_events.h"

namespace ppstage {

namespace {

int autoThreads(int world) {
  const int ranks_here = environment::localRanks().value_or(world);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / ranks_here);
}

// Every path this rank will write, proven writable before anything else is done: a run
// must not lose its figures or parameters to a typo found after its last step.
void checkOutputPaths(const Config& config, const Topology& topology) {
  const bool leader = topology.rank() == 0;
  const bool writes_state = topology.dpRank() == 0;
  if (leader && !config.output.metrics_json.empty()) {
    checkWritableFile(config.output.metrics_json, "output.metrics_json");
  }
  if (leader && !config.output.metrics_jsonl.empty()) {
    checkWritableFile(config.output.metrics_jsonl, "output.metrics_jsonl");
  }
  if (leader && !config.output.tensorboard.empty()) {
    requireTensorBoard();
    checkWritableDirectory(config.output.tensorboard, "output.tensorboard");
  }
  if (leader && !config.output.trace.empty()) {
    checkWritableFile(config.output.trace, "output.trace");
  }
  if (writes_state && !config.output.params_dir.empty()) {
    checkWritableDirectory(config.output.params_dir, "output.params_dir");
  }
  const std::string& checkpoints = config.checkpoint.dir;
  if ((writes_state || leader) && !checkpoints.empty()) {
    checkWritableDirectory(checkpoints, "checkpoint.dir");
  }
  if (leader) checkFreshCheckpoints(config.checkpoint);
}

// The micro-batches and the schedule of `topology` (a rank of it, or the layout alone).
void scheduleLayout(const Config& config, JobLayout& layout) {
  const Topology& topology = layout.topology;
  const ScheduleOptions options =
      scheduleOptionsFor(config.pipeline, topology.numStages(), topology.stagesPerRank());
  layout.batch = batchLayout(config.train.batch_size, topology.dpSize(), options.microbatches);
  layout.schedule = buildSchedule(makeScheduleRegistry(config.pipeline.schedule_plugin), options);
  PPSTAGE_CHECK(static_cast<int>(layout.schedule.ranks.size()) == topology.ppSize(), "schedule '",
                layout.schedule.name, "' has ", layout.schedule.ranks.size(),
                " ranks; the job has ", topology.ppSize(), " pipeline ranks");
}

}  // namespace

void checkFreshCheckpoints(const CheckpointConfig& checkpoint) {
  // A fresh run must not mix its checkpoints with another run's (pruning would keep the
  // other's newer ones and drop its own).
  if (checkpoint.dir.empty() || checkpoint.resume) return;
  const std::string newest = newestStepDirectory(checkpoint.dir);
  PPSTAGE_CHECK(newest.empty(), "--checkpoint.dir '", checkpoint.dir,
                "' already holds checkpoints (", newest,
                "); continue from them with --checkpoint.resume true, or give an empty "
                "directory");
}

void checkTrainable(const Config& config, int world) {
  validate(config);
  JobLayout layout(jobTopology(config, world));
  scheduleLayout(config, layout);
  checkFreshCheckpoints(config.checkpoint);
}

Topology jobTopology(const Config& config, int world) {
  const PipelineConfig& p = config.pipeline;
  const TrainConfig& t = config.train;
  const int stages = p.stages > 0              ? static_cast<int>(p.stages)
                     : !p.split_points.empty() ? static_cast<int>(p.split_points.size()) + 1
                                               : 0;
  return Topology::forJob(world, static_cast<int>(t.dp), stages,
                          static_cast<int>(p.stages_per_rank), p.placement, static_cast<int>(t.tp),
                          p.rank_order);
}

Topology jobTopologyOnHosts(const Config& config, int world) {
  const Topology job = jobTopology(config, world);
  if (mpiActive() && mpiWorldSize() == world) return job.withHosts(mpiHostOfRanks());
  return job;
}

// --train.threads, or (0) the cores of this machine shared among its ranks.
int computeThreads(const TrainConfig& train, int world) {
  return train.threads > 0 ? static_cast<int>(train.threads) : autoThreads(world);
}

JobLayout layoutOf(const Config& config, int rank, int world) {
  JobLayout layout(jobTopologyOnHosts(config, world).atRank(rank));
  layout.device = resolveDevice(config.train.device, config.comm.backend, thisHost());
#ifdef PPSTAGE_WITH_CUDA
  // The rank's GPU is the current one: CUDA's context, cuBLAS and NCCL start there, not
  // on GPU 0.
  if (layout.device.cuda()) c10::cuda::set_device(layout.device.cuda_index);
#endif
  const Topology& topology = layout.topology;
  checkOutputPaths(config, topology);
  layout.threads = computeThreads(config.train, world);
  setComputeThreads(layout.threads);
  scheduleLayout(config, layout);
  return layout;
}

}  // namespace ppstage
