// The schedule plugin API: how schedules, built-in or loaded, are made and registered.
//
// A schedule is a factory: given a ScheduleRequest, it returns one compute-only ActionList
// per pipeline rank (F, B or I + W; no SEND/RECV: a shared lowering pass adds those). It
// throws ppstage::Error for requests it cannot serve (too few micro-batches, ...).
//
// A plugin is a shared library exporting
//
//   extern "C" void ppstage_register_schedules(ppstage::ScheduleRegistry* registry);
//
// which adds its factories with registry->add(...). The built-in schedules register through
// the same function type, from an explicit list (schedules/builtin_schedules.cpp); nothing
// registers itself from a static constructor. This header is self-contained: a plugin
// needs ppstage's headers, not its libraries (schedules/examples/).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ppstage/core/error.h"
#include "ppstage/core/placement.h"
#include "ppstage/schedule/action.h"

namespace ppstage {

// What a schedule is asked for: the pipeline's layout (one replica; made from a Topology,
// which is where every rank-of-stage answer comes from) and the micro-batches per step.
struct ScheduleRequest {
  int num_stages = 1;
  int num_microbatches = 1;
  int stages_per_rank = 1;
  Placement placement = Placement::kLoop;
  std::vector<int> rank_of_stage;                // the pipeline rank of each stage
  std::vector<std::vector<int>> stages_of_rank;  // each pipeline rank's stages, increasing

  int numRanks() const { return static_cast<int>(stages_of_rank.size()); }
  // The stages `rank` runs, in increasing order.
  const std::vector<int>& stagesOf(int rank) const { return stages_of_rank.at(rank); }
  // The `v`-th stage of `rank` (its v-th virtual stage, 0 <= v < stages_per_rank).
  int stageOf(int rank, int v) const { return stages_of_rank.at(rank).at(v); }
};

using ScheduleFactory = std::function<std::vector<ActionList>(const ScheduleRequest&)>;

// The layout a schedule needs, which --pipeline.stages_per_rank and --pipeline.placement
// take for it where the user leaves them unset (zb-v: two stages per rank in a V).
struct ScheduleLayout {
  int stages_per_rank = 0;             // 0: any
  std::optional<Placement> placement;  // empty: any
  std::string why;                     // "runs two stages per rank placed in a V"
};

class ScheduleRegistry {
 public:
  // Throws ppstage::Error when `name` is empty or taken. `layout`: what the schedule needs
  // of the pipeline's layout, if anything.
  void add(const std::string& name, const std::string& description, ScheduleFactory factory,
           ScheduleLayout layout = {}) {
    PPSTAGE_CHECK(!name.empty(), "a schedule must have a name; one was registered with an ",
                  "empty name (described as '", description, "')");
    PPSTAGE_CHECK(entries_.count(name) == 0, "a schedule named '", name, "' is already registered");
    entries_.emplace(name, Entry{description, std::move(factory), std::move(layout)});
  }
  // nullptr when unknown.
  const ScheduleFactory* find(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second.factory;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, entry] : entries_) out.push_back(name);
    return out;
  }
  const std::string& description(const std::string& name) const {
    return entries_.at(name).description;
  }
  // The layout `name` declared it needs; nullptr when unknown.
  const ScheduleLayout* layout(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second.layout;
  }

 private:
  struct Entry {
    std::string description;
    ScheduleFactory factory;
    ScheduleLayout layout;
  };
  std::map<std::string, Entry> entries_;
};

// The registration function every plugin exports, under this name.
using RegisterSchedulesFn = void (*)(ScheduleRegistry* registry);
inline constexpr const char* kRegisterSchedulesSymbol = "ppstage_register_schedules";

}  // namespace ppstage
