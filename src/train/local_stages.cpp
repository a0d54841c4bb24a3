// See local_stages.h.
#include "local_stages.h"

#include <map>
#include <regex>

#include "ppstage/compile/model_compiler.h"
#include "ppstage/core/error.h"
#include "stage_boundaries.h"

namespace ppstage {

std::vector<LocalStage> compileLocalStages(const Config& config, const Topology& topology,
                                           RankModel& model) {
  ModelCompiler compiler(config.compile, model.split.graph, topology.rank());
  std::vector<LocalStage> stages;
  for (int s : topology.myStages()) {
    StageModule& module = model.split.stages[static_cast<size_t>(s)];
    LocalStage stage;
    stage.module = &module;
    for (const ModuleCall& call : model.split.graph.calls) stage.call_paths.push_back(call.path);
    stage.compiled = compiler.compile(module.graph, module.inputs.size(), module.node_call,
                                      "stage " + std::to_string(s));
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
      if (master != model.split.master_values.end()) my_masters.insert(*master);
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
