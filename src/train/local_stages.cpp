// See local_stages.h.
#include "local_stages.h"

#include <map>
#include <regex>

#include "ppstage/compile/model_compiler.h"
#include "ppstage/core/error.h"
#include "ppstage/graph/device_constants.h"
#include "stage_boundaries.h"

namespace ppstage {
namespace {

// Note [Placing stages]
// ~~~~~~~~~~~~~~~~~~~~~
// The model is captured, split, sharded and checked on the CPU; a rank on a GPU then moves
// each of its stages there before compiling it:
//   - the graph's Device constants and tensor constants (graph/device_constants.h);
//   - its parameters and buffers, in place (set_data): the same tensors move, so the
//     evaluation stages that share them (train/eval_plan.h) and everything that holds them
//     see the move;
//   - not its random keys: the CPU keys keyed random ops read (Note [Keyed random ops]);
//     the generator they make is the stream's device's (RandomStream::cuda_device).
// bf16's fp32 master values are copied there (MasterWeights copies them again). What the runtime
// allocates afterwards (receive buffers, gradients, optimizer state) follows the parameters or the
// executor's device.
void placeStage(StageModule& stage, const at::Device& device) {
  moveConstantsTo(*stage.graph, device);
  for (StageParameter& p : stage.parameters) {
    if (p.random_key || !p.value.defined() || p.value.device() == device) continue;
    p.value.set_data(p.value.data().to(device));
  }
}

}  // namespace

at::Device torchDevice(const RankDevice& device) {
  return device.cuda() ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.cuda_index))
                       : at::Device(at::kCPU);
}

std::vector<StageRecompute> recomputePerStage(const Config& config, const ModelSplit& split) {
  const ModelCompiler compiler(config.compile, split.graph, 0, config.train.recompute,
                               config.train.recompute_blocks);
  std::vector<StageRecompute> out;
  for (const StageModule& stage : split.stages) {
    StageRecompute r;
    r.stage = stage.index;
    r.blocks =
        compiler.recomputedBlocks(*stage.graph, stage.inputs.size(), stage.node_call, stage.index);
    if (!r.blocks.empty()) r.policy = toString(config.train.recompute);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<LocalStage> compileLocalStages(const Config& config, const Topology& topology,
                                           const RankDevice& device, RankModel& model) {
  ModelCompiler compiler(config.compile, model.split.graph, topology.rank(), config.train.recompute,
                         config.train.recompute_blocks);
  const at::Device target = torchDevice(device);

  std::vector<LocalStage> stages;
  for (int s : topology.myStages()) {
    StageModule& module = model.split.stages[static_cast<size_t>(s)];
    if (device.cuda()) placeStage(module, target);
    LocalStage stage;
    stage.module = &module;
    for (const ModuleCall& call : model.split.graph.calls) stage.call_paths.push_back(call.path);
    stage.compiled = compiler.compile(module.graph, module.inputs.size(), module.node_call,
                                      "stage " + std::to_string(s), s);
    const int64_t length = planLength(config, model.split);
    stage.input_spec = boundarySpecOf(module, true, length);
    if (s + 1 < topology.numStages()) {
      stage.output_spec = boundarySpecOf(module, false, length);
    }
    stages.push_back(std::move(stage));
    model.mine.push_back(&module);
  }
  std::map<std::string, at::Tensor> my_masters;  // bf16: the fp32 values this rank steps
  for (StageModule& module : model.split.stages) {
    if (!topology.owns(module.index)) {
      for (StageParameter& p : module.parameters) p.value = at::Tensor();
      continue;
    }
    for (const StageParameter& p : module.parameters) {
      const std::string& path = model.split.graph.parameters.at(p.model_parameters.at(0)).path;
      const auto master = model.split.master_values.find(path);
      if (master != model.split.master_values.end()) {
        my_masters.emplace(master->first, master->second.to(target));
      }
    }
  }
  model.split.master_values = std::move(my_masters);
  model.compile_cache = compiler.takeCache();
  return stages;
}

void shardLocalStages(const Config& config, const Topology& topology, RankModel& model,
                      std::shared_ptr<TpGroup> group) {
  if (topology.tpSize() == 1) return;
  model.tp_group =
      group ? std::move(group) : std::make_shared<TpGroup>(topology.tpRank(), topology.tpSize());
  const std::string& require = config.train.tp_require;
  const std::regex required(require.empty() ? "." : require);
  for (int s : topology.myStages()) {
    StageModule& stage = model.split.stages.at(static_cast<size_t>(s));
    model.tp_reports.push_back(shardStage(stage, model.split.graph, *model.tp_group));
    for (const StageParameter& p : stage.parameters) {  // bf16: the fp32 masters too
      const auto master = model.split.master_values.find(
          model.split.graph.parameters.at(p.model_parameters.at(0)).path);
      if (p.shard.sharded() && master != model.split.master_values.end()) {
        master->second = shardOf(master->second, p.shard);
      }
    }
    for (const TpRegion& region : model.tp_reports.back().regions) {
      PPSTAGE_CHECK(region.sharded || require.empty() || !std::regex_match(region.module, required),
                    "--train.tp ", topology.tpSize(), ": region ", region.module, " of stage ", s,
                    " cannot be sharded (", region.why, ") and --train.tp_require '",
                    config.train.tp_require, "' asks for it");
    }
  }
}

}  // namespace ppstage
