// How pipeline stages are placed on pipeline ranks (see Topology and the schedules).
#pragma once

#include "ppstage/core/choice.h"

namespace ppstage {

// kLoop: stage s on pp rank s % P (0 1 2 3 0 1 2 3). kV: two stages per rank, the second
// half mirrored (0 1 2 3 3 2 1 0), so the last stage sits with the first.
enum class Placement { kLoop, kV };

template <>
struct Choices<Placement> {
  static constexpr const char* kOption = "pipeline.placement";
  static constexpr std::pair<Placement, const char*> kNames[] = {{Placement::kLoop, "loop"},
                                                                 {Placement::kV, "v"}};
};

// How world ranks map to (data-parallel, pipeline, tensor-parallel) ranks, outermost
// first; tensor parallelism is always innermost (a TP group is adjacent ranks, which
// mpirun places on one host). kReplicaMajor (dp-pp-tp): replica by replica, each
// pipeline's ranks adjacent, so a pipeline fills a host and the replicas' all-reduces cross
// hosts. kPipelineMajor (pp-dp-tp): pipeline rank by pipeline rank, each stage's replicas
// adjacent, so the data-parallel all-reduces stay on a host and the pipeline crosses
// hosts, which sends one activation per micro-batch between them instead.
enum class RankOrder { kReplicaMajor, kPipelineMajor };

template <>
struct Choices<RankOrder> {
  static constexpr const char* kOption = "pipeline.rank_order";
  static constexpr std::pair<RankOrder, const char*> kNames[] = {
      {RankOrder::kReplicaMajor, "dp-pp-tp"}, {RankOrder::kPipelineMajor, "pp-dp-tp"}};
};

}  // namespace ppstage
