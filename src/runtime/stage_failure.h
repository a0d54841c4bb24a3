// What a failing forward of a stage reports: the cause, and the module of the stage
// graph's failing node (graph/model_failure.h).
#pragma once

#include <ATen/core/ivalue.h>

#include <exception>
#include <string>
#include <vector>

#include "ppstage/runtime/executor.h"

namespace ppstage {

// `e` is what running `stage` on `args` threw.
std::string describeStageFailure(const LocalStage& stage, const std::vector<c10::IValue>& args,
                                 const std::exception& e);

}  // namespace ppstage
