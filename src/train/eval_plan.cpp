// See eval_plan.h.
#include "eval_plan.h"

#include "job_data.h"
#include "local_stages.h"
#include "ppstage/core/error.h"
#include "ppstage/core/text.h"

namespace ppstage {

namespace {

// Makes `eval`'s parameters the training stage's own tensors, by name. Throws
// ppstage::Error when the eval-mode stage uses one training's does not have, or holds
// another shard of it.
void shareParameters(const StageModule& train, StageModule& eval) {
  for (StageParameter& p : eval.parameters) {
    const auto same = std::find_if(train.parameters.begin(), train.parameters.end(),
                                   [&](const StageParameter& t) { return t.name == p.name; });
    PPSTAGE_CHECK(same != train.parameters.end(), "in eval mode, stage ", eval.index, " uses '",
                  p.name,
                  "', which the training stage does not: evaluation cannot share its "
                  "parameters");
    const bool same_shard = same->shard.dim == p.shard.dim && same->shard.parts == p.shard.parts;
    PPSTAGE_CHECK(same->value.sizes() == p.value.sizes() && same_shard, "in eval mode, stage ",
                  eval.index, " holds '", p.name, "' as ", shapeText(p.value.sizes().vec()),
                  ", training as ", shapeText(same->value.sizes().vec()),
                  " (tensor parallelism found other regions)");
    p.value = same->value;
  }
}

}  // namespace

std::unique_ptr<EvalModel> planEval(const Config& config, const JobLayout& layout,
                                    const RankModel& train, const Dataset& train_data,
                                    const InputSpec* data_input) {
  const Topology& topology = layout.topology;
  const StagePartition& plan = train.split.partition;
  PipelineConfig pipeline = config.pipeline;
  pipeline.stages = static_cast<int64_t>(plan.numStages());
  pipeline.split_points.clear();
  pipeline.balance = Balance::kParams;  // one stage: nothing to balance, nothing to measure
  for (size_t s = 1; s < plan.stages.size(); ++s) {
    pipeline.split_points.push_back(plan.units.at(plan.stages[s].first_unit).path);
  }
  auto eval = std::make_unique<EvalModel>();
  eval->model.split = splitCaptured(evalCaptureOf(train.split, config, data_input), pipeline);
  shardLocalStages(config, topology, eval->model, train.tp_group);
  for (int s : topology.myStages()) {
    shareParameters(train.split.stages.at(static_cast<size_t>(s)),
                    eval->model.split.stages.at(static_cast<size_t>(s)));
  }
  Config eval_config = config;  // evaluation records no autograd: nothing to recompute
  eval_config.train.recompute = RecomputePolicy::kNone;
  eval_config.train.recompute_blocks.clear();
  eval->stages = compileLocalStages(eval_config, topology, layout.device, eval->model);
  // The stages hold what evaluation runs; the second copy of the model's tensors goes.
  releaseLoadedTensors(eval->model.split);
  eval->model.split.master_values.clear();  // evaluation steps nothing
  eval->data = openValidationSet(config, layout, train.split, train_data);
  if (layout.sequences) eval->sequences = sequencesOf(*eval->data, config);
  const int64_t samples = eval->data->size();
  eval->batches = samples == 0 ? config.eval.batches
                               : std::min(config.eval.batches, samples / config.train.batch_size);
  return eval;
}

}  // namespace ppstage
