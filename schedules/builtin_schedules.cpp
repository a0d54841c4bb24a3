// The explicit list of built-in schedules: no static registration.
#include "builtin_schedules.h"

namespace ppstage {

void requireOneStagePerRank(const ScheduleRequest& request, const char* schedule) {
  PPSTAGE_CHECK(request.stages_per_rank == 1, schedule, " runs one stage per rank; got ",
                request.stages_per_rank, " (--pipeline.stages_per_rank); use interleaved-1f1b ",
                "for several");
}

void registerBuiltinSchedules(ScheduleRegistry* registry) {
  registry->add("gpipe",
                "all forwards, then all backwards (activations of every micro-batch "
                "alive at once)",
                gpipeSchedule);
  registry->add("1f1b",
                "one forward one backward: warm-up, steady state, cool-down "
                "(activations of at most stages - stage micro-batches alive)",
                oneFOneBSchedule);
  registry->add("interleaved-1f1b",
                "1F1B over several virtual stages per rank (Megatron-LM): "
                "bubble divided by the stages per rank",
                interleavedOneFOneBSchedule);
  registry->add("zb-h1",
                "zero bubble H1: backward split into input (I) and weight (W) "
                "gradients, W deferred into the bubbles; 1F1B's peak memory, a third of its "
                "bubble when F, I and W cost the same",
                zeroBubbleH1Schedule);
  registry->add("zb-v",
                "zero bubble V: two stages per rank in a V (rank r: r and 2P-1-r, "
                "--pipeline.placement v), I and W split; about no bubble when F, I and W "
                "cost the same",
                zeroBubbleVSchedule,
                ScheduleLayout{2, Placement::kV, "runs two stages per rank placed in a V"});
}

}  // namespace ppstage
