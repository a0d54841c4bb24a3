// See include/ppstage/train/time_balance.h.
#include "ppstage/train/time_balance.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>

#include "ppstage/compile/compiled_stage.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/error.h"
#include "ppstage/core/statistics.h"
#include "ppstage/runtime/loss.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "ppstage/split/stage_module.h"
#include "ppstage/train/job_plan.h"

namespace ppstage {

namespace {

// One forward and backward of `stage` on `values` (the previous unit's outputs, or the
// model's input); returns its outputs, detached, for the next unit.
// With `loss` (the last unit), the backward starts from the loss of its first output.
std::vector<at::Tensor> timeUnit(const StageModule& stage, CompiledStage& compiled,
                                 const std::vector<at::Tensor>& values, const UnitLoss& loss,
                                 double& forward_s, double& backward_s) {
  std::vector<c10::IValue> args;
  std::vector<at::Tensor> wrt;
  for (size_t i = 0; i < stage.inputs.size(); ++i) {
    at::Tensor input = values.at(i).detach();
    if (stage.inputs[i].meta.requires_grad) wrt.push_back(input.requires_grad_(true));
    args.emplace_back(input);
  }
  for (const StageParameter& p : stage.parameters) {
    args.emplace_back(p.value);
    if (p.value.requires_grad()) wrt.push_back(p.value);
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<c10::IValue> outputs = compiled.run(std::move(args));
  const at::Tensor loss_value = loss ? loss(outputs.at(0).toTensor()) : at::Tensor();
  forward_s = secondsSince(start);
  std::vector<at::Tensor> roots, grads, next;
  for (const c10::IValue& v : outputs) {
    const at::Tensor& t = v.toTensor();
    next.push_back(t.detach());
    if (!t.requires_grad() || loss_value.defined()) continue;
    roots.push_back(t);
    grads.push_back(at::ones_like(t));
  }
  if (loss_value.defined() && loss_value.requires_grad()) {
    roots.push_back(loss_value);
    grads.push_back(at::ones_like(loss_value));
  }
  start = std::chrono::steady_clock::now();
  if (!roots.empty() && !wrt.empty()) {
    torch::autograd::grad(roots, wrt, grads, /*retain_graph=*/false, /*create_graph=*/false,
                          /*allow_unused=*/true);
  }
  backward_s = secondsSince(start);
  return next;
}

}  // namespace

std::vector<StageModule> unitStages(const ModelGraph& model, const std::vector<SplitUnit>& units,
                                    const ValueShapes& shapes, const std::string& why) {
  StagePlan per_unit;
  per_unit.units = units;
  per_unit.method = "units";
  for (size_t u = 0; u < units.size(); ++u) per_unit.stages.push_back(StageRange{u, u + 1});
  try {
    return extractStages(model, per_unit, shapes);
  } catch (const Error& e) {
    throw Error(detail::concat(why, " runs every unit on its own, and a unit boundary cannot ",
                               "be cut: ", e.what(), "; balance by params or flops, or give ",
                               "--pipeline.split_points"));
  }
}

UnitSeconds measureUnitSeconds(const ModelGraph& model, const std::vector<SplitUnit>& units,
                               const ValueShapes& shapes,
                               const std::vector<at::Tensor>& example_inputs, const UnitLoss& loss,
                               int runs) {
  const std::vector<StageModule> stages =
      unitStages(model, units, shapes, "--pipeline.balance time");
  CompileCache cache(CompileMode::kNone);
  std::vector<std::unique_ptr<CompiledStage>> compiled;
  for (const StageModule& stage : stages) {
    compiled.push_back(std::make_unique<CompiledStage>(stage.graph, stage.inputs.size(), cache,
                                                       "unit " + stage.modules.front()));
  }
  std::vector<std::vector<double>> forward(units.size()), backward(units.size());
  for (int run = 0; run < runs; ++run) {
    std::vector<at::Tensor> values = example_inputs;
    for (size_t u = 0; u < stages.size(); ++u) {
      double f = 0, b = 0;
      const bool last = u + 1 == stages.size();
      values = timeUnit(stages[u], *compiled[u], values, last ? loss : UnitLoss(), f, b);
      forward[u].push_back(f);
      backward[u].push_back(b);
    }
  }
  UnitSeconds seconds;
  for (size_t u = 0; u < units.size(); ++u) {
    seconds.forward.push_back(median(forward[u]));
    seconds.backward.push_back(median(backward[u]));
  }
  return seconds;
}

UnitLoss trainingLoss(LossKind kind) {
  if (kind == LossKind::kModel) return [](const at::Tensor& output) { return output.sum(); };
  return [kind](const at::Tensor& output) {
    const at::Tensor target = kind == LossKind::kCrossEntropy
                                  ? at::zeros(output.sizes().slice(0, output.dim() - 1), at::kLong)
                                  : at::zeros_like(output);
    return computeLoss(kind, output, target.detach());
  };
}

namespace {

ScheduleOptions scheduleOptionsOf(const PipelineConfig& config, const Topology& pipeline) {
  return scheduleOptionsFor(config, pipeline.numStages(), pipeline.stagesPerRank());
}

}  // namespace

std::vector<at::Tensor> microBatchInputs(const CapturedModel& captured, const Config& config,
                                         const Topology& pipeline) {
  const int microbatches = scheduleOptionsOf(config.pipeline, pipeline).microbatches;
  const BatchLayout layout = batchLayout(config.train.batch_size, pipeline.dpSize(), microbatches);
  return exampleInputsOf(captured, layout.microbatch_size,
                         static_cast<uint64_t>(config.train.seed));
}

UnitSeconds measureUnitSeconds(const CapturedModel& captured, const Config& config,
                               const Topology& pipeline, LossKind loss) {
  return measureUnitSeconds(captured.graph, findUnits(captured.graph, captured.shapes),
                            captured.shapes, microBatchInputs(captured, config, pipeline),
                            trainingLoss(loss));
}

UnitTimes unitTimesOf(const UnitSeconds& seconds, const PipelineConfig& config,
                      const Topology& pipeline) {
  UnitTimes times;
  for (size_t u = 0; u < seconds.forward.size(); ++u) times.seconds.push_back(seconds.of(u));
  times.predict_step = [seconds, config, pipeline](const std::vector<StageRange>& stages) {
    ScheduleOptions options = scheduleOptionsOf(config, pipeline);
    for (const StageRange& s : stages) {
      double f = 0, b = 0;
      for (size_t u = s.first_unit; u < s.end_unit; ++u) {
        f += seconds.forward[u];
        b += seconds.backward[u];
      }
      options.costs.per_stage.push_back({f, b, b / 2, b / 2});
    }
    try {
      return buildSchedule(makeScheduleRegistry(config.schedule_plugin), options)
          .simulation.makespan;
    } catch (const Error&) {
      return 0.0;  // the run itself reports what is wrong with the schedule
    }
  };
  return times;
}

ModelSplit splitModelMeasuringTime(const Config& config) {
  const std::optional<DataFile> file = openDataFileOf(config);
  CapturedModel captured = captureForSplit(config, file ? &file->input : nullptr);
  if (!balancesByTime(config.pipeline)) return splitCaptured(std::move(captured), config.pipeline);
  const PipelineConfig& p = config.pipeline;
  const int stages = std::max(static_cast<int>(p.stages), 1);
  const int per_rank = static_cast<int>(p.stages_per_rank);
  const int dp = static_cast<int>(std::max<int64_t>(config.train.dp, 1));
  const Topology pipeline =
      Topology::forJob(std::max(stages / per_rank, 1) * dp, dp, stages, per_rank, p.placement);
  const UnitTimes times = unitTimesOf(
      measureUnitSeconds(captured, config, pipeline,
                         runLossKind(config, file ? &*file : nullptr, captured.model.input)),
      config.pipeline, pipeline);
  return splitCaptured(std::move(captured), config.pipeline, &times);
}

}  // namespace ppstage
