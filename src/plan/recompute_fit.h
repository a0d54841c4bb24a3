// The planner's recomputation (Note [Recomputation in the plan], planner.h): what a
// candidate over the memory budget recomputes, per stage, to fit it.
#pragma once

#include "ppstage/core/topology.h"
#include "ppstage/plan/cost_profile.h"
#include "ppstage/plan/planner.h"
#include "ppstage/schedule/pipeline_schedule.h"
#include "stage_costs.h"

namespace ppstage {

// `c` (simulated, over `budget`) with recomputation chosen per stage under the faster
// policy that fits (Note [Recomputation in the plan]); otherwise its prediction with every
// block recomputed under the policy that keeps least (to name the smallest peak), or `c`
// itself where the profile measured no recomputation. The result's peak tells which.
PlanCandidate fitByRecomputing(const CostProfile& profile, const PipelineSchedule& schedule,
                               const Topology& pipeline, double budget, const PlanCandidate& c);

}  // namespace ppstage
