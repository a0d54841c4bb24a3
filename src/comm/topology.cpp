// See include/ppstage/comm/topology.h.
#include "ppstage/comm/topology.h"

#include "ppstage/core/error.h"

namespace ppstage {

Topology Topology::create(int world_size, int rank, int pp, int dp, int stages,
                          Placement placement) {
  PPSTAGE_CHECK(pp >= 1 && dp >= 1, "pipeline size (", pp, ") and data-parallel size (", dp,
                ") must be positive");
  PPSTAGE_CHECK(world_size == pp * dp, "the job has ", world_size, " ranks but pipeline size ", pp,
                " x data-parallel size ", dp, " = ", pp * dp, "; start it with mpirun -np ",
                pp * dp, " or change --train.dp");
  PPSTAGE_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " outside a world of ", world_size);
  PPSTAGE_CHECK(stages >= pp && stages % pp == 0, stages, " stages cannot be spread over ", pp,
                " pipeline ranks: the number of stages must be a multiple of it");
  PPSTAGE_CHECK(placement != Placement::kV || stages == 2 * pp, "a V placement needs exactly ",
                "two stages per rank (", 2 * pp, " stages for ", pp, " ranks); got ", stages);
  return Topology(rank, pp, dp, stages, placement);
}

int Topology::ppRankOfStage(int stage) const {
  PPSTAGE_INTERNAL_ASSERT(stage >= 0 && stage < stages_, "stage ", stage, " of ", stages_);
  if (placement_ == Placement::kV && stage >= pp_) return 2 * pp_ - 1 - stage;
  return stage % pp_;
}

std::vector<int> Topology::myStages() const {
  std::vector<int> stages;
  for (int s = 0; s < stages_; ++s) {
    if (ppRankOfStage(s) == ppRank()) stages.push_back(s);
  }
  return stages;
}

std::string Topology::describe() const {
  std::string stages;
  for (int s : myStages()) stages += (stages.empty() ? "" : ",") + std::to_string(s);
  return detail::concat("rank ", rank_, " of ", worldSize(), ": pp rank ", ppRank(), " of ", pp_,
                        ", dp rank ", dpRank(), " of ", dp_, ", stages ", stages);
}

}  // namespace ppstage
