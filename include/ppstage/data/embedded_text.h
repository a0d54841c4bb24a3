// The text ppstage trains on when no --data.path is given, compiled into the binary.
// Source and licence: src/data/corpus/README.md.
#pragma once

#include <string_view>

namespace ppstage {

std::string_view embeddedText();
// "Jargon File 4.4.7 (public domain), excerpt"
const char* embeddedTextName();

}  // namespace ppstage
