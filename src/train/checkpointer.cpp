// See checkpointer.h.
#include "checkpointer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "ppstage/checkpoint/checkpoint_dir.h"
#include "ppstage/checkpoint/checkpoint_reader.h"
#include "ppstage/checkpoint/model_identity.h"
#include "ppstage/checkpoint/sha256.h"
#include "ppstage/comm/agreement.h"
#include "ppstage/comm/communicator.h"
#include "ppstage/core/allocator.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/environment.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/core/text.h"
#include "ppstage/runtime/optimizer.h"
#include "ppstage/train/job_setup.h"
#include "step_runner.h"

namespace ppstage {
namespace {

using Clock = std::chrono::steady_clock;

// Testing aid (environment::checkpointFault): the chosen rank SIGKILLs itself after writing
// its files of the chosen checkpoint, before the manifest: a crash in the middle of a save.
void maybeDieMidSave(int64_t steps_done, int rank) {
  const char* fault = environment::checkpointFault();
  if (fault == nullptr) return;
  long long step = -1;
  int victim = -1;
  if (std::sscanf(fault, "kill:%lld:%d", &step, &victim) == 2 && step == steps_done &&
      victim == rank) {
    std::raise(SIGKILL);
  }
}

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The path a stage parameter is stored under.
std::string storedPathOf(const ModelGraph& graph, const StageParameter& p) {
  return storedPath(graph, p.model_parameters.at(0));
}

// Stored path -> the lowest stage holding it: the one stage that writes it.
std::map<std::string, int> writerStages(const ModelSplit& split) {
  std::map<std::string, int> writer;
  for (const StageModule& stage : split.stages) {
    for (const StageParameter& p : stage.parameters) {
      if (!p.random_key) writer.emplace(storedPathOf(split.graph, p), stage.index);
    }
  }
  return writer;
}

// Writes `bytes` as dir/name and describes the file for the manifest.
nlohmann::json writeCheckpointFile(const std::string& dir, const std::string& name,
                                   const std::string& bytes) {
  writeFileAtomically(dir + "/" + name, bytes);
  return {
      {"name", name}, {"bytes", static_cast<int64_t>(bytes.size())}, {"sha256", sha256Hex(bytes)}};
}

SavedLayout savedLayoutOf(const Config& config, const JobLayout& job_layout,
                          const ModelSplit& split) {
  SavedLayout layout;
  const Topology& t = job_layout.topology;
  layout.pp = t.ppSize();
  layout.dp = t.dpSize();
  layout.tp = t.tpSize();
  layout.stages = t.numStages();
  layout.stages_per_rank = t.stagesPerRank();
  layout.microbatches = job_layout.batch.microbatches;
  layout.schedule = job_layout.schedule.name;
  layout.compile_mode = toString(config.compile.mode);
  for (const StageModule& stage : split.stages) layout.stage_modules.push_back(stage.modules);
  return layout;
}

std::string describeLayout(const SavedLayout& l) {
  return detail::concat("pp ", l.pp, " x dp ", l.dp, l.tp > 1 ? detail::concat(" x tp ", l.tp) : "",
                        ", ", l.stages, " stage", l.stages > 1 ? "s" : "", ", ", l.schedule);
}

// A warning where resuming changes the learning-rate schedule: another --train.steps
// stretches or shrinks a cosine or linear schedule from the step resumed at; "" where it
// does not (the same steps, a constant schedule, or a checkpoint that did not record them).
std::string scheduleChangeText(const Manifest& m, const TrainConfig& train) {
  if (m.steps == 0 || m.steps == train.steps || train.lr_schedule == LrSchedule::kConstant) {
    return "";
  }
  return detail::concat("warning: the checkpoint was saved by a run of --train.steps ", m.steps,
                        " (lr_schedule ", m.lr_schedule, "); this run has --train.steps ",
                        train.steps, ", so its ", toString(train.lr_schedule),
                        " learning rate from step ", m.step + 1, " on follows a schedule over ",
                        train.steps, " steps, not ", m.steps, " (give --train.steps ", m.steps,
                        " to continue the schedule as it was)");
}

}  // namespace

Checkpointer::Checkpointer(const Config& config, const JobLayout& layout, const RankModel& model,
                           Communicator& world)
    : config_(config), layout_(layout), model_(model), world_(world) {}

at::Tensor Checkpointer::wholeOf(const at::Tensor& piece, const TensorShard& shard) const {
  return shard.sharded() ? gatherShards(piece, shard, *model_.tp_group) : piece;
}

std::vector<Checkpointer::StageState> Checkpointer::stateOfMyStages(StepRunner& runner) const {
  const std::map<std::string, int> writer = writerStages(model_.split);
  std::vector<StageState> stages;
  for (const StageModule* stage : model_.mine) {
    StageState state{stage->index, {}, {}};
    for (const StageParameter& p : stage->parameters) {
      if (p.random_key) continue;
      const std::string path = storedPathOf(model_.split.graph, p);
      if (writer.at(path) != stage->index) continue;
      // bf16: the fp32 master, or widened; tensor parallelism: gathered whole
      state.tensors[path] = wholeOf(runner.storedValueOf(p.value), p.shard);
      if (p.is_parameter && p.value.requires_grad()) {
        TensorDict optimizer = runner.optimizerStateOf(p.value);
        for (auto& [name, tensor] : optimizer) {
          if (tensor.dim() == p.value.dim()) tensor = wholeOf(tensor, p.shard);
        }
        if (!optimizer.empty()) state.optimizer[path] = std::move(optimizer);
      }
    }
    stages.push_back(std::move(state));
  }
  return stages;
}

std::string Checkpointer::writeMyFiles(const std::string& dir, int64_t steps_done,
                                       StepRunner& runner) {
  // Every collective (the tensor-parallel gathers) before any file: a rank whose write
  // fails must not leave its group waiting in a gather.
  const std::vector<StageState> stages = stateOfMyStages(runner);
  nlohmann::json part = {{"files", nlohmann::json::array()}, {"tensors", nlohmann::json::object()}};
  if (layout_.topology.tpRank() != 0) return part.dump();  // the group's first rank writes
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    PPSTAGE_CHECK(!ec, "cannot create '", dir, "': ", ec.message());
    for (const StageState& stage : stages) {
      const std::string s = std::to_string(stage.index);
      const std::string tensor_file = "tensors-stage" + s + ".pt";
      const std::string state_file = "optimizer-stage" + s + ".pt";
      part["files"].push_back(writeCheckpointFile(dir, tensor_file, pickleTensors(stage.tensors)));
      part["files"].push_back(writeCheckpointFile(dir, state_file, pickleStates(stage.optimizer)));
      for (const auto& [path, tensor] : stage.tensors) {
        part["tensors"][path] = {
            {"file", tensor_file},
            {"optimizer_file", stage.optimizer.count(path) > 0 ? state_file : ""}};
      }
    }
  } catch (const std::exception& e) {
    return nlohmann::json{{"error", e.what()}}.dump();
  }
  maybeDieMidSave(steps_done, world_.rank());
  return part.dump();
}

double Checkpointer::expectedSaveSeconds() const {
  const Topology& topology = layout_.topology;
  if (topology.dpRank() != 0 || topology.tpRank() != 0) return 0;  // what writeMyFiles writes
  const TrainConfig& train = config_.train;
  const double state_per_element = train.optimizer == OptimizerKind::kAdamW ? 8
                                   : train.momentum > 0                     ? 4
                                                                            : 0;
  double bytes = 0;
  for (const StageModule* stage : model_.mine) {
    for (const StageParameter& p : stage->parameters) {
      const double whole =
          static_cast<double>(p.value.numel()) * (p.shard.sharded() ? topology.tpSize() : 1);
      bytes += whole * (4 + (p.is_parameter ? state_per_element : 0));
    }
  }
  constexpr size_t kProbeBytes = 16 << 20;
  const std::string probe(kProbeBytes, '\1');
  const std::string path = config_.checkpoint.dir + "/.save-probe-" + std::to_string(world_.rank());
  double seconds = 0;
  for (int run = 0; run < 2; ++run) {  // the faster of two: a sync's noise only adds
    const auto start = std::chrono::steady_clock::now();
    writeFileAtomically(path, probe);
    sha256Hex(probe);
    seconds = run == 0 ? secondsSince(start) : std::min(seconds, secondsSince(start));
  }
  std::remove(path.c_str());
  return bytes * seconds / static_cast<double>(kProbeBytes);
}

std::string Checkpointer::finishOnLeader(const std::string& dir, int64_t steps_done,
                                         int64_t samples_seen,
                                         const std::vector<std::string>& parts) {
  // Anything thrown here would leave the other ranks waiting on the outcome's broadcast.
  try {
    Manifest m = manifestOf(steps_done, samples_seen);
    std::map<std::string, nlohmann::json> where;
    for (size_t rank = 0; rank < parts.size(); ++rank) {
      const nlohmann::json part = nlohmann::json::parse(parts[rank]);
      if (part.contains("error")) {
        return detail::concat("rank ", rank, ": ", part.at("error").get<std::string>());
      }
      if (!part.contains("files")) continue;  // a replica that writes nothing
      for (const nlohmann::json& f : part.at("files")) {
        m.files.push_back({f.at("name").get<std::string>(), f.at("bytes").get<int64_t>(),
                           f.at("sha256").get<std::string>()});
      }
      for (const auto& [path, files] : part.at("tensors").items()) where[path] = files;
    }
    for (SavedTensor& t : m.tensors) {
      PPSTAGE_INTERNAL_ASSERT(where.count(t.path) > 0, "no rank wrote ", t.path);
      t.file = where.at(t.path).at("file").get<std::string>();
      t.optimizer_file = where.at(t.path).at("optimizer_file").get<std::string>();
    }
    writeFileAtomically(dir + "/manifest.json", manifestToJson(m));
    syncDirectory(config_.checkpoint.dir);  // the new step's entry, before any removal
    pruneCheckpoints(config_.checkpoint.dir, config_.checkpoint.keep);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

Manifest Checkpointer::manifestOf(int64_t steps_done, int64_t samples_seen) const {
  Manifest m;
  m.step = steps_done;
  m.time = utcNow();
  m.model = config_.model.name;
  m.model_hash = modelHash(model_.split.graph);
  m.optimizer = toString(config_.train.optimizer);
  m.seed = config_.train.seed;
  m.batch_size = config_.train.batch_size;
  m.steps = config_.train.steps;
  m.lr_schedule = toString(config_.train.lr_schedule);
  m.samples_seen = samples_seen;
  m.random_keys = randomKeys(model_.split.graph);
  m.layout = savedLayoutOf(config_, layout_, model_.split);
  m.tensors = modelTensors(model_.split.graph);
  return m;
}

CheckpointRecord Checkpointer::save(int64_t steps_done, StepRunner& runner) {
  const auto start = Clock::now();
  const std::string dir = config_.checkpoint.dir + "/" + checkpointName(steps_done);
  runner.prepareSave();  // a sharded optimizer's whole state, gathered over the replicas
  const bool writes = layout_.topology.dpRank() == 0;
  const std::string mine = writes ? writeMyFiles(dir, steps_done, runner) : std::string("{}");
  const std::vector<std::string> parts = allGatherStrings(world_, mine);
  std::string outcome;
  if (world_.rank() == 0) outcome = finishOnLeader(dir, steps_done, runner.samplesSeen(), parts);
  world_.broadcast(outcome, 0);
  // A save's buffers (a stage's tensors and optimizer state, pickled) are large and brief,
  // and the heap keeps freed memory for the steps to reuse (core/allocator.h). With a save
  // every 100 steps, gpt-small's resident memory grew by 20 MB per 1,000 steps
  // (docs/hardening.md, the soak): memory freed and kept in pieces that later saves did not
  // reuse. Handing it back after each save keeps resident memory flat; the next step faults
  // its activations in once.
  releaseFreedMemory();
  if (!outcome.empty()) {
    throw JobError("cannot save checkpoint " + dir + ": " + outcome, kExitNotSaved,
                   world_.rank() == 0);
  }
  return {dir, secondsSince(start)};
}

std::optional<Checkpointer::Resumed> Checkpointer::resume(StepRunner& runner, std::ostream& log) {
  const bool leader = world_.rank() == 0;
  std::string chosen;
  runAgreed(world_, [&] {  // a failure on rank 0 must not leave the others waiting
    if (!leader) return;
    std::vector<std::string> warnings;
    const auto found = findNewestCheckpoint(config_.checkpoint.dir, warnings);
    for (const std::string& w : warnings) log << "ppstage: warning: " << w << "\n";
    if (found) {
      chosen = found->dir;
      return;
    }
    // Saves that never finished leave nothing to resume; a damaged one must not be
    // silently replaced by a fresh run that later prunes it.
    PPSTAGE_CHECK(!hasDamagedCheckpoint(config_.checkpoint.dir),
                  "--checkpoint.resume: no checkpoint in '", config_.checkpoint.dir,
                  "' is intact (", joinText(warnings, "; "),
                  "); move the directory away to start fresh");
  });
  world_.broadcast(chosen, 0);
  if (chosen.empty()) {
    if (leader) {
      log << "no complete checkpoint in " << config_.checkpoint.dir << "; starting fresh"
          << std::endl;
    }
    return std::nullopt;
  }
  Resumed resumed{chosen, {}};
  runAgreed(world_, [&] {
    resumed.manifest = manifestFromJson(readFile(chosen + "/manifest.json", "checkpoint manifest"),
                                        chosen + "/manifest.json");
    const Manifest& m = resumed.manifest;
    checkSameModel(m, chosen, model_.split.graph);
    PPSTAGE_CHECK(m.seed == config_.train.seed, "checkpoint ", chosen, " was trained with ",
                  "--train.seed ", m.seed, ", this run has ", config_.train.seed,
                  " (the data order and random ops follow the seed)");
    PPSTAGE_CHECK(m.optimizer == toString(config_.train.optimizer), "checkpoint ", chosen,
                  " holds ", m.optimizer, " state, this run uses --train.optimizer ",
                  toString(config_.train.optimizer));
    CheckpointReader reader(chosen, m);
    load(reader, runner);
  });
  runner.setSamplesSeen(resumed.manifest.samples_seen);
  if (leader) {
    log << "resuming from " << chosen << " (saved at " << describeLayout(resumed.manifest.layout)
        << ")" << std::endl;
    const std::string reshaped = scheduleChangeText(resumed.manifest, config_.train);
    if (!reshaped.empty()) log << reshaped << std::endl;
  }
  return resumed;
}

void Checkpointer::load(CheckpointReader& reader, StepRunner& runner) {
  at::NoGradGuard no_grad;
  for (StageModule* stage : model_.mine) {
    for (StageParameter& p : stage->parameters) {
      if (p.random_key) continue;
      const std::string path = storedPathOf(model_.split.graph, p);
      const at::Tensor saved = shardOf(reader.tensor(path), p.shard);  // saved whole
      at::Tensor value = runner.masterOf(p.value);                     // bf16: its fp32 master
      PPSTAGE_CHECK(saved.sizes() == value.sizes() && saved.scalar_type() == storedDtype(value),
                    "checkpoint tensor ", path, " is ", dtypeName(saved.scalar_type()), " ",
                    shapeText(saved.sizes().vec()), " where the model stores ",
                    dtypeName(storedDtype(value)), " ", shapeText(value.sizes().vec()));
      value.copy_(saved);  // a bf16 buffer is stored widened
      if (p.is_parameter && p.value.requires_grad()) {
        TensorDict state = reader.optimizerState(path);
        for (auto& [name, tensor] : state) {
          if (tensor.dim() == value.dim()) tensor = shardOf(tensor, p.shard);
        }
        runner.loadOptimizerState(p.value, state, path);
      }
    }
  }
  runner.mastersLoaded();
}

}  // namespace ppstage
