// Small text helpers shared by option parsing, CSV and reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace c10 {
enum class ScalarType : int8_t;
}

namespace ppstage {

// Splits "a,b,,c" into {"a", "b", "c"} (whitespace trimmed, empty items dropped).
std::vector<std::string> splitList(const std::string& text, char separator = ',');

// {"a", "b", "c"} -> "a, b, c" (with separator ", ").
std::string joinText(const std::vector<std::string>& items, const std::string& separator);

// {8, 128, 64} -> "[8, 128, 64]"
std::string shapeText(const std::vector<int64_t>& sizes);

// The shortest text that reads back as exactly `value`: 0.003, not 0.0030000000000000001
// (how --help prints a default).
std::string shortestText(double value);

// Human-readable dtype name ("float32", "int64", ...). In ppstage_lib, not ppstage_core: it
// needs LibTorch (src/core/dtype_name.cpp).
std::string dtypeName(c10::ScalarType dtype);

}  // namespace ppstage
