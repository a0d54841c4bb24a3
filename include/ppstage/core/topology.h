// Topology: the parallel layout of a job, built and validated once (forJob). No other code
// does rank arithmetic: schedules, the executor, gradient sync and the metrics ask it.
//
// By default (RankOrder::kReplicaMajor, --pipeline.rank_order dp-pp-tp) world ranks are
// laid out replica by replica, and within a replica pipeline rank by pipeline rank, each
// pipeline rank being tp adjacent ranks (its tensor-parallel group, which holds the shards
// of the same stages): world rank = (d*pp + p)*tp + t for data-parallel rank d, pipeline
// rank p and tensor-parallel rank t. With tp 1, the pp ranks of replica d are world ranks
// d*pp .. d*pp+pp-1. RankOrder::kPipelineMajor (pp-dp-tp) swaps the outer two: world rank =
// (p*dp + d)*tp + t, so a stage's replicas are adjacent (on one host, where mpirun fills
// hosts slot by slot) and the pipeline crosses hosts. A pipeline message goes from TP rank t of one
// stage to TP rank t of the next. Stages are placed on pipeline ranks either in a loop (stage s on
// pp rank s % pp: 0 1 2 3 0 1 2 3) or in a V (0 1 2 3 3 2 1 0), with stages / pp stages on every
// pipeline rank.
//
// A Topology is the layout of the whole job; atRank() gives it as one rank sees it, which
// the queries about "this rank" (rank(), myStages(), prevRank(), ...) need.
#pragma once

#include <string>
#include <vector>

#include "ppstage/core/placement.h"

namespace ppstage {

class Topology {
 public:
  // The layout of a job of `world` ranks: `dp` replicas of world / (dp x tp) pipeline ranks
  // of `tp` ranks each, and `stages` stages (0: pipeline ranks x stages_per_rank) spread
  // evenly over them. stages_per_rank is a check: 1 accepts whatever stages / pipeline
  // ranks comes to. Throws ppstage::Error unless dp x tp divides world, the stages are a
  // multiple of the pipeline ranks, stages_per_rank is 1 or matches, and a V has two stages
  // per rank.
  static Topology forJob(int world, int dp, int stages, int stages_per_rank,
                         Placement placement = Placement::kLoop, int tp = 1,
                         RankOrder order = RankOrder::kReplicaMajor);
  // One replica of stages / stages_per_rank pipeline ranks: what a schedule is made for.
  // Throws ppstage::Error unless stages_per_rank divides stages (and as forJob).
  static Topology forPipeline(int stages, int stages_per_rank,
                              Placement placement = Placement::kLoop);
  // This layout as world rank `rank` sees it.
  Topology atRank(int rank) const;

  // --- the job ---------------------------------------------------------------------------
  int worldSize() const { return pp_ * dp_ * tp_; }
  int ppSize() const { return pp_; }
  int dpSize() const { return dp_; }
  int tpSize() const { return tp_; }
  int numStages() const { return stages_; }
  int stagesPerRank() const { return stages_ / pp_; }
  Placement placement() const { return placement_; }
  RankOrder rankOrder() const { return order_; }

  // Pipeline rank that runs `stage` (in every replica).
  int ppRankOfStage(int stage) const;
  // The stages pipeline rank `pp_rank` runs, in increasing order; stagesOf(r)[v] is its
  // v-th (virtual) stage.
  std::vector<int> stagesOf(int pp_rank) const;
  // stagesOf() of every pipeline rank.
  std::vector<std::vector<int>> stagesOfEveryRank() const;
  // Pipeline, data-parallel and tensor-parallel rank of world rank `world_rank`.
  int ppRankOf(int world_rank) const {
    return replicaMajor() ? world_rank / tp_ % pp_ : world_rank / tp_ / dp_;
  }
  int dpRankOf(int world_rank) const {
    return replicaMajor() ? world_rank / tp_ / pp_ : world_rank / tp_ % dp_;
  }
  int tpRankOf(int world_rank) const { return world_rank % tp_; }
  // World rank of pipeline rank `pp_rank` in replica `dp_rank`, tensor-parallel rank `tp_rank`.
  int worldRank(int pp_rank, int dp_rank, int tp_rank = 0) const {
    return (replicaMajor() ? dp_rank * pp_ + pp_rank : pp_rank * dp_ + dp_rank) * tp_ + tp_rank;
  }

  // --- as one rank sees it (atRank) -------------------------------------------------------
  int rank() const;
  int ppRank() const { return ppRankOf(rank()); }
  int dpRank() const { return dpRankOf(rank()); }
  int tpRank() const { return tpRankOf(rank()); }
  // Stages this rank runs, in increasing order.
  std::vector<int> myStages() const { return stagesOf(ppRank()); }
  // World rank, in this rank's replica and at its tensor-parallel rank, that runs `stage`.
  int ownerOfStage(int stage) const { return worldRank(ppRankOfStage(stage), dpRank(), tpRank()); }
  bool owns(int stage) const { return ownerOfStage(stage) == rank(); }
  // World rank running stage-1 / stage+1 in this replica; -1 at the pipeline's ends.
  int prevRank(int stage) const { return stage == 0 ? -1 : ownerOfStage(stage - 1); }
  int nextRank(int stage) const { return stage + 1 == stages_ ? -1 : ownerOfStage(stage + 1); }
  // Colors for Communicator::split: one pipeline per replica and tensor-parallel rank, one
  // dp group per pipeline and tensor-parallel rank, one tensor-parallel group per pipeline
  // rank and replica (adjacent world ranks). A rank that joins none of the groups a split
  // makes (`member` false) gets the one color no pipeline has: those ranks land in a group
  // of their own that nobody uses.
  int pipelineColor(bool member = true) const {
    return member ? dpRank() * tp_ + tpRank() : dp_ * tp_;
  }
  int dataParallelColor() const { return ppRank() * tp_ + tpRank(); }
  int tensorParallelColor() const { return rank() / tp_; }

  // "rank 3 of 4: pp rank 1 of 2, dp rank 1 of 2, stages 1,3" (", tp rank 1 of 2" with tp)
  std::string describe() const;

  // --- hosts -------------------------------------------------------------------------------
  // This layout with every world rank's host (numbered from 0 in the order of each
  // host's first rank; comm/mpi_session.h's mpiHostOfRanks). Without them every rank is
  // on host 0. The job's, whichever rank's view this is.
  Topology withHosts(std::vector<int> host_of_rank) const;
  int hostOf(int world_rank) const;  // world_rank in 0 to worldSize() - 1
  int hostCount() const;

 private:
  Topology(int pp, int dp, int tp, int stages, Placement placement, RankOrder order)
      : pp_(pp), dp_(dp), tp_(tp), stages_(stages), placement_(placement), order_(order) {}
  bool replicaMajor() const { return order_ == RankOrder::kReplicaMajor; }

  int rank_ = -1;  // -1: the job as a whole, no rank's view
  int pp_, dp_, tp_, stages_;
  Placement placement_;
  RankOrder order_;
  std::vector<int> host_of_rank_;  // empty: one host
};

// The hosts of `host_of_rank` (numbered from 0 as withHosts takes them): its largest + 1,
// 1 where empty.
int hostCountOf(const std::vector<int>& host_of_rank);

// What of a job's traffic crosses between hosts (Topology::withHosts): the stage boundaries
// s -> s + 1 whose two stages run on different hosts in some replica and tensor-parallel
// rank, and whether some data-parallel or tensor-parallel group spans hosts (its
// all-reduces cross them), and which pairs of pipeline ranks run on different hosts in
// some replica and tensor-parallel rank (the sum of tied weights' copies crosses them).
struct HostCrossings {
  std::vector<int> boundaries;  // s, for s -> s + 1
  bool data_parallel = false;
  bool tensor_parallel = false;
  std::vector<std::vector<bool>> pipeline_ranks_apart;  // [p][q]; empty: none apart

  bool apart(int p, int q) const {
    return !pipeline_ranks_apart.empty() &&
           pipeline_ranks_apart.at(static_cast<size_t>(p)).at(static_cast<size_t>(q));
  }
};
HostCrossings hostCrossings(const Topology& job);

}  // namespace ppstage
