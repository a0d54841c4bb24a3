// See include/ppstage/train/job_setup.h.
#include "ppstage/train/job_setup.h"

#include <optional>
#include <utility>

#include "eval_plan.h"
#include "job_data.h"
#include "job_layout.h"
#include "local_stages.h"
#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/error.h"
#include "stage_boundaries.h"

namespace ppstage {

namespace {

// The model's split, cut as config.pipeline says into the layout's stages.
ModelSplit splitForJob(const Config& config, const Topology& topology, CapturedModel captured) {
  PipelineConfig pipeline = config.pipeline;
  pipeline.stages = topology.numStages();  // 0 (automatic) resolved by the layout
  ModelSplit split = splitCaptured(std::move(captured), pipeline);
  split.model.input.samples = nullptr;  // it holds the data set, which not every rank keeps
  return split;
}

// Everything local: no collective, so that runAgreed can report any rank's failure.
JobSetup setUpLocally(const Config& config, int rank, int world, CapturedRun& run) {
  JobLayout layout = layoutOf(config, rank, world);
  const Topology& topology = layout.topology;
  const std::optional<DataFile>& file = run.file;
  std::shared_ptr<const Dataset> data = file ? file->data : nullptr;
  RankModel model;
  model.split = splitForJob(config, topology, std::move(run.model));
  if (file) {
    layout.roles = file->roles;
    layout.roles.inputs.clear();
    for (size_t f : model.split.input_fields)
      layout.roles.inputs.push_back(file->roles.offered_fields.at(f));
  }
  layout.loss = run.loss;
  if (layout.loss == LossKind::kModel) {
    checkModelComputesLoss(file.has_value(), layout.roles, model.split);
  }
  const SampleShape output =
      outputSample(model.split.stages.back().outputs.at(0), config.train.batch_size);
  if (data) {
    checkTargetsOf(*data, layout, output, config.train.ignore_index);
  } else {
    data = openDataset(config.data, dataRequestOf(model.split, layout.loss, config));
  }
  const SampleShape& input = data->fields().at(layout.roles.inputs.at(0)).sample;
  const SampleShape& target = data->fields().at(layout.roles.target).sample;
  layout.token_inputs = at::isIntegralType(input.dtype, /*includeBool=*/false);
  layout.classifies = layout.loss == LossKind::kCrossEntropy && target.shape.empty();
  layout.compute_dtype = model.split.compute_dtype;
  layout.message_bytes =
      messageBytes(model.split, layout.batch.microbatch_size, planLength(config, model.split));
  layout.tokens_per_step = config.train.batch_size;
  if (layout.token_inputs) {
    for (int64_t d : input.shape) layout.tokens_per_step *= d;
  }
  checkHoldsOneBatch(*data, config.train.batch_size);
  if (config.data.cutsDocuments()) layout.sequences = sequencesOf(*data, config);
  const bool reads = topology.owns(0) || topology.owns(topology.numStages() - 1) || rank == 0;
  shardLocalStages(config, topology, model, nullptr);
  std::vector<LocalStage> stages = compileLocalStages(config, topology, layout.device, model);
  std::unique_ptr<EvalModel> eval;
  if (config.eval.every > 0) {
    eval = planEval(config, layout, model, *data, file ? &file->input : nullptr);
    if (!reads) eval->data = nullptr;
  }
  releaseLoadedTensors(model.split);
  JobSetup setup(std::move(layout), std::move(model), reads ? data : nullptr, std::move(stages));
  setup.setEval(std::move(eval));
  return setup;
}

}  // namespace

JobSetup::JobSetup(JobLayout layout, RankModel model, std::shared_ptr<const Dataset> data,
                   std::vector<LocalStage> local_stages)
    : layout_(std::move(layout)),
      model_(std::move(model)),
      data_(std::move(data)),
      local_stages_(std::move(local_stages)) {}

void JobSetup::attachTensorParallel(Communicator& world) {
  const Topology& topology = layout_.topology;
  if (topology.tpSize() == 1) return;
  model_.tp_group->attach(world.split(topology.tensorParallelColor(), topology.tpRank()));
}

std::vector<LocalStage> JobSetup::takeLocalStages() {
  PPSTAGE_INTERNAL_ASSERT(!stages_taken_, "this rank's stages were taken already");
  stages_taken_ = true;
  return std::move(local_stages_);
}

JobSetup setUpJob(const Config& config, CapturedRun run, Communicator& world) {
  std::optional<JobSetup> setup;
  runAgreed(world, [&] { setup.emplace(setUpLocally(config, world.rank(), world.size(), run)); });
  setup->attachTensorParallel(world);
  return std::move(*setup);
}

}  // namespace ppstage
