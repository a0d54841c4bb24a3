// The first phase of `ppstage train`: what every rank decides before the first collective.
//
// planJob() resolves the layout (Topology), the micro-batches and the schedule, splits the
// model, picks the loss, opens the data and compiles this rank's stages, all locally, then
// agrees with every other rank (runAgreed): a bad option, model or data file on any rank
// ends all of them with the same one-line error before any of them waits on another.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/config/config.h"
#include "ppstage/core/topology.h"
#include "ppstage/data/dataset.h"
#include "ppstage/runtime/executor.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/split/model_split.h"

namespace ppstage {

class Communicator;

// How each replica's share of the global batch is cut.
struct BatchLayout {
  int microbatches = 1;
  int64_t local_batch = 1;      // samples per replica and step
  int64_t microbatch_size = 1;  // samples per micro-batch
};

// Move-only. my_stages and every LocalStage point into split.stages, and the compiled
// stages into *compile_cache: moving the plan keeps them valid, copying would not.
struct JobPlan {
  explicit JobPlan(Topology layout_of_this_rank) : topology(std::move(layout_of_this_rank)) {}

  Topology topology;  // as this rank sees it
  BatchLayout batch;
  PipelineSchedule schedule;  // every pipeline rank's lowered actions
  ModelSplit split;           // every stage; only this rank's keep their parameters
  LossKind loss = LossKind::kCrossEntropy;
  // Open where samples are read (the first and the last stage's ranks) and on rank 0,
  // which describes it; null elsewhere.
  std::unique_ptr<Dataset> data;
  std::unique_ptr<CompileCache> compile_cache;  // this rank's, shared by its stages
  std::vector<LocalStage> local_stages;         // this rank's stages, compiled, in order (until
                                                // StepRunner hands them to its Executor)
  std::vector<StageModule*> my_stages;          // the same stages' modules (in `split`)
  int threads = 1;                              // intra-op threads of this rank
  int64_t tokens_per_step = 0;  // samples x tokens per sample (samples, for float inputs)
};

// The agreed plan of this rank of `world` (collective; see above). Sets this process's
// intra-op threads and TorchScript's shape strategy. Throws JobError on every rank when
// any rank's planning failed.
JobPlan planJob(const Config& config, Communicator& world);

// The global batch cut into `dp` replicas of `microbatches` equal micro-batches. Throws
// ppstage::Error when it does not divide evenly.
BatchLayout batchLayout(int64_t batch_size, int dp, int microbatches);

}  // namespace ppstage
