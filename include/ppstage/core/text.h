// Small text helpers shared by option parsing, CSV and reports.
#pragma once

#include <string>
#include <vector>

namespace ppstage {

// Splits "a,b,,c" into {"a", "b", "c"} (whitespace trimmed, empty items dropped).
std::vector<std::string> splitList(const std::string& text, char separator = ',');

}  // namespace ppstage
