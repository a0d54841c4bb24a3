// The learning rate of each step (--train.lr_schedule, --train.warmup_steps,
// --train.min_lr), as torchtitan's and Megatron's schedulers shape it: a linear warm-up to
// the peak --train.lr, then constant, or a cosine or linear decay that reaches min_lr at
// the last step. A function of the step and the options alone, so a resumed run (with the
// same --train.steps and warm-up) continues it exactly.
#pragma once

#include <cstdint>

#include "ppstage/config/config.h"

namespace ppstage {

// The learning rate of step `step` (0-based) of `train.steps`:
//   step < W (warm-up steps):  lr * (step + 1) / W
//   after, with p = (step - W) / (steps - W - 1) going from 0 to 1 (p = 0 when there is
//   one step after warm-up or none):
//     constant  lr
//     linear    lr - (lr - min_lr) * p
//     cosine    min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2
double learningRate(const TrainConfig& train, int64_t step);

}  // namespace ppstage
