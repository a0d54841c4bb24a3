// Lossless CSV form of a schedule: one line per rank (rank 0 first), its actions separated
// by commas ("0F0,0F1,0SEND_F0,..."). Lines starting with '#' are comments; blank lines
// are skipped. `--pipeline.schedule file.csv` runs such a table, lowered first when it has
// no communication actions.
#pragma once

#include <string>
#include <vector>

#include "ppstage/schedule/action.h"

namespace ppstage {

std::string scheduleToCsv(const std::vector<ActionList>& ranks, const std::string& comment = "");

// Throws ppstage::Error naming `source`, the line and the column of the first bad token.
std::vector<ActionList> scheduleFromCsv(const std::string& text, const std::string& source);

}  // namespace ppstage
