// See include/ppstage/train/lr_schedule.h.
#include "ppstage/train/lr_schedule.h"

#include <cmath>

namespace ppstage {

double learningRate(const TrainConfig& train, int64_t step) {
  const int64_t warmup = train.warmup_steps;
  if (step < warmup) {
    return train.lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  const int64_t decay_steps = train.steps - warmup - 1;
  const double p =
      decay_steps > 0 ? static_cast<double>(step - warmup) / static_cast<double>(decay_steps) : 0;
  const double span = train.lr - train.min_lr;
  switch (train.lr_schedule) {
    case LrSchedule::kConstant: return train.lr;
    case LrSchedule::kLinear: return train.lr - span * p;
    case LrSchedule::kCosine: return train.min_lr + span * (1 + std::cos(M_PI * p)) / 2;
  }
  return train.lr;
}

}  // namespace ppstage
