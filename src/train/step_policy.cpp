// See include/ppstage/train/step_policy.h.
#include "ppstage/train/step_policy.h"

namespace ppstage {

bool logsStep(const OutputConfig& output, int64_t step, int64_t first_step, int64_t steps) {
  if (output.log_every <= 0) return false;
  return step == first_step || (step + 1) % output.log_every == 0 || step + 1 == steps;
}

}  // namespace ppstage
