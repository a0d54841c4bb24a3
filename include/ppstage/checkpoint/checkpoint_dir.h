// A checkpoint directory D on disk: one D/step-<8 digits>/ per saved step, each holding
// tensor files and, written last, manifest.json (checkpoint/manifest.h). A step's
// checkpoint is complete exactly when its manifest parses and every file it lists has the
// recorded size and sha256; anything else (a crash mid-save, a truncated or corrupt file)
// is incomplete, skipped by readers and removed by pruning once a newer one is complete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ppstage/checkpoint/manifest.h"

namespace ppstage {

// "step-00000040".
std::string checkpointName(int64_t step);

// How far whyIncomplete looks: every file's sha256 (what completeness means), or only that
// every file exists with its size (cheap: what pruning uses).
enum class Verify { kChecksums, kSizes };

// Why `step_dir` is not a complete checkpoint ("manifest.json is missing",
// "tensors-stage1.pt has 120 bytes, the manifest says 4096", ...), or "" when it is, with
// its manifest in `*manifest`.
std::string whyIncomplete(const std::string& step_dir, Manifest* manifest,
                          Verify verify = Verify::kChecksums);

// The newest step directory of `dir`, complete or not; "" when there is none.
std::string newestStepDirectory(const std::string& dir);

struct FoundCheckpoint {
  std::string dir;  // "D/step-00000040"
  Manifest manifest;
};

// The newest complete checkpoint in `dir`, if any (a missing `dir` has none). Every newer
// incomplete one adds a line to `warnings`: "skipping incomplete checkpoint D/step-...: why".
std::optional<FoundCheckpoint> findNewestCheckpoint(const std::string& dir,
                                                    std::vector<std::string>& warnings);

// Whether `dir` holds a checkpoint whose save finished (it has its manifest) that is not
// complete now: damaged after it was written, where a missing manifest means a save that
// never finished.
bool hasDamagedCheckpoint(const std::string& dir);

// Keeps the `keep` newest complete checkpoints of `dir` and removes the rest, and every
// incomplete one older than the newest complete one ("complete" here by file sizes, see
// Verify). Call it only after the newest one is complete and its entry in `dir` synced,
// and where no other process writes in `dir`.
void pruneCheckpoints(const std::string& dir, int64_t keep);

}  // namespace ppstage
