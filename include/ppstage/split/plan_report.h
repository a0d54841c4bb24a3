// How `ppstage split` shows a ModelSplit: a readable table, or JSON.
#pragma once

#include <iosfwd>
#include <string>

#include "ppstage/split/model_split.h"

namespace ppstage {

// Per stage: modules, parameter count, estimated FLOPs, boundary tensors in and out (names
// and shapes for the example batch); then the tied parameters.
void printPlanTable(std::ostream& out, const ModelSplit& split);

// The same as JSON: {"model", "method", "input", "num_params", "units", "stages": [{"index",
// "modules", "num_params", "flops", "inputs", "outputs", "parameters"}], "tied_parameters",
// "timings_s"}.
std::string planToJson(const ModelSplit& split);

}  // namespace ppstage
