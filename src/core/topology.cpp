// See include/ppstage/core/topology.h.
#include "ppstage/core/topology.h"

#include <algorithm>

#include "ppstage/core/error.h"

namespace ppstage {

Topology Topology::forJob(int world, int dp, int stages, int stages_per_rank, Placement placement,
                          int tp, RankOrder order) {
  PPSTAGE_CHECK(dp >= 1 && tp >= 1 && world >= 1, "the job has ", world, " ranks, --train.dp ", dp,
                " and --train.tp ", tp, "; all must be positive");
  PPSTAGE_CHECK(world % (dp * tp) == 0,
                "the world size must be pipeline ranks x --train.dp x --train.tp: ", world,
                " ranks cannot form ", dp, " data-parallel replica", dp > 1 ? "s" : "",
                tp > 1 ? detail::concat(" of pipeline ranks of ", tp, " tensor-parallel ranks")
                       : std::string());
  const int pp = world / (dp * tp);
  if (stages == 0) stages = pp * stages_per_rank;
  PPSTAGE_CHECK(stages >= pp && stages % pp == 0, stages, " stages cannot be spread evenly over ",
                pp, " pipeline ranks (", world, " ranks / --train.dp ", dp, " / --train.tp ", tp,
                "): the number of stages must be a multiple of the pipeline ranks");
  PPSTAGE_CHECK(stages_per_rank == 1 || stages_per_rank == stages / pp,
                "--pipeline.stages_per_rank is ", stages_per_rank, " but ", stages, " stages on ",
                pp, " pipeline ranks make ", stages / pp, " per rank");
  PPSTAGE_CHECK(placement != Placement::kV || stages == 2 * pp, "a V placement needs exactly ",
                "two stages per rank (", 2 * pp, " stages for ", pp, " ranks); got ", stages);
  return Topology(pp, dp, tp, stages, placement, order);
}

Topology Topology::forPipeline(int stages, int stages_per_rank, Placement placement) {
  PPSTAGE_CHECK(stages_per_rank >= 1 && stages >= stages_per_rank && stages % stages_per_rank == 0,
                stages, " stages cannot be spread over ranks at ", stages_per_rank,
                " per rank (--pipeline.stages_per_rank must divide --pipeline.stages)");
  return forJob(stages / stages_per_rank, 1, stages, stages_per_rank, placement);
}

Topology Topology::atRank(int rank) const {
  PPSTAGE_CHECK(rank >= 0 && rank < worldSize(), "rank ", rank, " outside a world of ",
                worldSize());
  Topology view = *this;
  view.rank_ = rank;
  return view;
}

int Topology::rank() const {
  PPSTAGE_INTERNAL_ASSERT(rank_ >= 0, "a question about this rank to the job's layout: use atRank");
  return rank_;
}

int Topology::ppRankOfStage(int stage) const {
  PPSTAGE_INTERNAL_ASSERT(stage >= 0 && stage < stages_, "stage ", stage, " of ", stages_);
  if (placement_ == Placement::kV && stage >= pp_) return 2 * pp_ - 1 - stage;
  return stage % pp_;
}

std::vector<int> Topology::stagesOf(int pp_rank) const {
  std::vector<int> stages;
  for (int s = 0; s < stages_; ++s) {
    if (ppRankOfStage(s) == pp_rank) stages.push_back(s);
  }
  return stages;
}

std::vector<std::vector<int>> Topology::stagesOfEveryRank() const {
  std::vector<std::vector<int>> ranks;
  for (int r = 0; r < pp_; ++r) ranks.push_back(stagesOf(r));
  return ranks;
}

std::string Topology::describe() const {
  std::string stages;
  for (int s : myStages()) {
    if (!stages.empty()) stages += ',';
    stages += std::to_string(s);
  }
  const std::string tp =
      tp_ > 1 ? detail::concat(", tp rank ", tpRank(), " of ", tp_) : std::string();
  return detail::concat("rank ", rank(), " of ", worldSize(), ": pp rank ", ppRank(), " of ", pp_,
                        ", dp rank ", dpRank(), " of ", dp_, tp, ", stages ", stages);
}

Topology Topology::withHosts(std::vector<int> host_of_rank) const {
  PPSTAGE_CHECK(host_of_rank.empty() || static_cast<int>(host_of_rank.size()) == worldSize(),
                "hosts for ", host_of_rank.size(), " ranks in a world of ", worldSize());
  for (const int host : host_of_rank) {
    PPSTAGE_CHECK(host >= 0 && host < worldSize(), "host ", host, " of a rank outside 0 to ",
                  worldSize() - 1);
  }
  Topology out = *this;
  out.host_of_rank_ = std::move(host_of_rank);
  return out;
}

int Topology::hostOf(int world_rank) const {
  return host_of_rank_.empty() ? 0 : host_of_rank_.at(static_cast<size_t>(world_rank));
}

int Topology::hostCount() const { return hostCountOf(host_of_rank_); }

int hostCountOf(const std::vector<int>& host_of_rank) {
  if (host_of_rank.empty()) return 1;
  return *std::max_element(host_of_rank.begin(), host_of_rank.end()) + 1;
}

HostCrossings hostCrossings(const Topology& job) {
  HostCrossings out;
  const auto host = [&](int pp_rank, int dp_rank, int tp_rank) {
    return job.hostOf(job.worldRank(pp_rank, dp_rank, tp_rank));
  };
  for (int s = 0; s + 1 < job.numStages(); ++s) {
    bool crosses = false;
    for (int d = 0; d < job.dpSize(); ++d) {
      for (int t = 0; t < job.tpSize(); ++t) {
        crosses =
            crosses || host(job.ppRankOfStage(s), d, t) != host(job.ppRankOfStage(s + 1), d, t);
      }
    }
    if (crosses) out.boundaries.push_back(s);
  }
  const auto pp = static_cast<size_t>(job.ppSize());
  std::vector<std::vector<bool>> apart(pp, std::vector<bool>(pp, false));
  bool any_apart = false;
  for (int p = 0; p < job.ppSize(); ++p) {
    for (int d = 0; d < job.dpSize(); ++d) {
      for (int t = 0; t < job.tpSize(); ++t) {
        out.data_parallel = out.data_parallel || host(p, d, t) != host(p, 0, t);
        out.tensor_parallel = out.tensor_parallel || host(p, d, t) != host(p, d, 0);
        for (int q = 0; q < job.ppSize(); ++q) {
          if (host(p, d, t) == host(q, d, t)) continue;
          apart[static_cast<size_t>(p)][static_cast<size_t>(q)] = true;
          any_apart = true;
        }
      }
    }
  }
  if (any_apart) out.pipeline_ranks_apart = std::move(apart);
  return out;
}

}  // namespace ppstage
