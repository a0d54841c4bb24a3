// Evaluation's model (--eval.every): the training capture specialized for eval mode
// (evalCaptureOf), cut where training is, sharing training's parameters, with the
// validation set.
// Internal to train/: job_setup.cpp assembles the setup from these.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ppstage/train/job_setup.h"

namespace ppstage {

// Evaluation's model: captured in eval mode, cut where `train` is, sharing its parameters.
std::unique_ptr<EvalModel> planEval(const Config& config, const JobLayout& layout,
                                    const RankModel& train, const Dataset& train_data,
                                    const InputSpec* data_input);

}  // namespace ppstage
