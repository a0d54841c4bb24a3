// Topology: the parallel layout of a job, built and validated once. No other code does
// rank arithmetic.
//
// World ranks are laid out replica by replica: the pp ranks of data-parallel replica d are
// world ranks d*pp .. d*pp+pp-1. Stages are placed on pipeline ranks either in a loop
// (stage s on pp rank s % pp: 0 1 2 3 0 1 2 3) or in a V (0 1 2 3 3 2 1 0), with
// stages / pp stages on every pipeline rank.
#pragma once

#include <string>
#include <vector>

#include "ppstage/core/placement.h"

namespace ppstage {

class Topology {
 public:
  // Throws ppstage::Error unless world == pp * dp, stages is a positive multiple of pp, and
  // a V placement has exactly two stages per rank.
  static Topology create(int world_size, int rank, int pp, int dp, int stages,
                         Placement placement = Placement::kLoop);

  int worldSize() const { return pp_ * dp_; }
  int rank() const { return rank_; }
  int ppSize() const { return pp_; }
  int dpSize() const { return dp_; }
  int ppRank() const { return rank_ % pp_; }
  int dpRank() const { return rank_ / pp_; }
  int numStages() const { return stages_; }
  int stagesPerRank() const { return stages_ / pp_; }
  Placement placement() const { return placement_; }

  // Pipeline rank that runs `stage` (in every replica).
  int ppRankOfStage(int stage) const;
  // World rank of pipeline rank `pp_rank` in replica `dp_rank`.
  int worldRank(int pp_rank, int dp_rank) const { return dp_rank * pp_ + pp_rank; }
  // World rank, in this rank's replica, that runs `stage`.
  int ownerOfStage(int stage) const { return worldRank(ppRankOfStage(stage), dpRank()); }
  // Stages this rank runs, in increasing order.
  std::vector<int> myStages() const;
  bool owns(int stage) const { return ownerOfStage(stage) == rank_; }
  // World rank running stage-1 / stage+1 in this replica; -1 at the pipeline's ends.
  int prevRank(int stage) const { return stage == 0 ? -1 : ownerOfStage(stage - 1); }
  int nextRank(int stage) const { return stage + 1 == stages_ ? -1 : ownerOfStage(stage + 1); }
  // Colors for Communicator::split: one pipeline per replica, one dp group per pp rank.
  int pipelineColor() const { return dpRank(); }
  int dataParallelColor() const { return ppRank(); }

  std::string describe() const;  // "rank 3 of 4: pp rank 1 of 2, dp rank 1 of 2, stages 1,3"

 private:
  Topology(int rank, int pp, int dp, int stages, Placement placement)
      : rank_(rank), pp_(pp), dp_(dp), stages_(stages), placement_(placement) {}

  int rank_, pp_, dp_, stages_;
  Placement placement_;
};

}  // namespace ppstage
