// Small text helpers shared by option parsing, CSV and reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppstage {

// Splits "a,b,,c" into {"a", "b", "c"} (whitespace trimmed, empty items dropped).
std::vector<std::string> splitList(const std::string& text, char separator = ',');

// {8, 128, 64} -> "[8, 128, 64]"
std::string shapeText(const std::vector<int64_t>& sizes);

}  // namespace ppstage
