// Checkpoints of a training run: saving this rank's part of the state after a step, and
// resuming from the newest complete checkpoint, at any layout.
//
// Save (collective): every rank of data-parallel replica 0 writes, for each of its stages,
// tensors-stage<s>.pt (parameters and buffers) and optimizer-stage<s>.pt into
// D/step-<8 digits>/, each file atomically (core/file.h). A tensor held by several stages
// (tied weights) is written once, by the lowest of them, under its stored path
// (checkpoint/model_identity.h). Then one gather tells rank 0 every rank's files and
// checksums (or failure); rank 0 writes manifest.json last, which completes the checkpoint,
// prunes to --checkpoint.keep, and tells every rank the outcome.
//
// Resume (collective): rank 0 finds the newest complete checkpoint and every rank loads the
// tensors of its own stages by module path, and their optimizer state, from whichever files
// hold them; refusals (another model, other shapes, another seed or optimizer) are agreed,
// so every rank exits 2 with the one line.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ppstage/checkpoint/manifest.h"
#include "ppstage/observe/metrics.h"
#include "ppstage/split/tensor_shard.h"

namespace ppstage {

class CheckpointReader;
class Communicator;
class StepRunner;
struct Config;
struct JobLayout;
struct RankModel;

class Checkpointer {
 public:
  // `layout` and `model` (this rank's stages: what it saves and loads into) must outlive it.
  Checkpointer(const Config& config, const JobLayout& layout, const RankModel& model,
               Communicator& world);

  // Continues from the newest complete checkpoint in --checkpoint.dir: loads this rank's
  // stages and optimizer state, sets the runner's data position, and returns where it was
  // (dir and manifest); nullopt when there is none (the leader says so on `log`). Skipped
  // incomplete checkpoints are warned about on `log`. Throws JobError (exit 2) on every rank
  // when the checkpoint does not fit this run.
  struct Resumed {
    std::string dir;
    Manifest manifest;
  };
  std::optional<Resumed> resume(StepRunner& runner, std::ostream& log);

  // Saves the state after `steps_done` steps. Returns its record; throws JobError (exit 4)
  // on every rank when any rank could not write its part.
  CheckpointRecord save(int64_t steps_done, StepRunner& runner);

  // Seconds this rank's part of a save is expected to take: the bytes it writes (its
  // stages' tensors whole in fp32, and their optimizer state) at the speed of a probe (16
  // MiB written into --checkpoint.dir, synced and checksummed, as a save writes; the faster
  // of two). 0 where it writes nothing (a replica other than the first, a tensor-parallel
  // rank other than its group's first). A rough figure:
  // a 151M-parameter gpt (1.7 GB of checkpoint) was estimated at 2.8 and 22 s and saved in
  // 12 s on this machine's disk; what it decides is whether a save fits a second.
  double expectedSaveSeconds() const;

  static constexpr int kExitNotSaved = 4;

 private:
  std::string writeMyFiles(const std::string& dir, int64_t steps_done, StepRunner& runner);
  // What one of this rank's stages saves (the tensors it writes, by path, and their
  // optimizer state), whole: collective over the tensor-parallel group.
  struct StageState {
    int index;
    std::map<std::string, at::Tensor> tensors;
    std::map<std::string, std::map<std::string, at::Tensor>> optimizer;
  };
  std::vector<StageState> stateOfMyStages(StepRunner& runner) const;
  // `piece` (a parameter's or its optimizer state's, of a tensor held as `shard`) whole:
  // gathered over the tensor-parallel group (collective), or itself.
  at::Tensor wholeOf(const at::Tensor& piece, const TensorShard& shard) const;
  std::string finishOnLeader(const std::string& dir, int64_t steps_done, int64_t samples_seen,
                             const std::vector<std::string>& parts);
  Manifest manifestOf(int64_t steps_done, int64_t samples_seen) const;
  void load(CheckpointReader& reader, StepRunner& runner);

  const Config& config_;
  const JobLayout& layout_;
  const RankModel& model_;
  Communicator& world_;
};

}  // namespace ppstage
