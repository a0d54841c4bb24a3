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

}  // namespace ppstage
