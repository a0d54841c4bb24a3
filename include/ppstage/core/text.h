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

// The one of `names` that `typed` most likely misspells, for "did you mean ...?": the
// nearest by edit distance (insertions, deletions, substitutions, and swaps of neighbours,
// each 1), at most 2 away, or 3 for a name of 12 characters or more; the first of several
// as near. "" when none is that near. "train.step" -> "train.steps".
std::string closestName(const std::string& typed, const std::vector<std::string>& names);

// {8, 128, 64} -> "[8, 128, 64]"
std::string shapeText(const std::vector<int64_t>& sizes);

// The shortest text that reads back as exactly `value`: 0.003, not 0.0030000000000000001
// (how --help prints a default).
std::string shortestText(double value);

// `text` as a terminal shows it, byte for byte: every byte that is not printable is written
// as \xNN (control characters, such as a binary file's bytes or an escape sequence in a file
// name, and bytes that are no part of valid UTF-8). Printable ASCII and valid UTF-8 beyond
// it stay as they are, but for its control characters (U+0080-U+009F) and those that break
// or reorder the line (U+2028-U+202E, U+2066-U+2069).
std::string printableText(const std::string& text);

// Human-readable dtype name ("float32", "int64", ...). In ppstage_lib, not ppstage_core: it
// needs LibTorch (src/core/dtype_name.cpp).
std::string dtypeName(c10::ScalarType dtype);

}  // namespace ppstage
