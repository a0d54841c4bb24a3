// Reading a whole file, with the one error every command reports for a file it cannot read.
#pragma once

#include <string>

namespace ppstage {

// The bytes of the file at `path`. Throws ppstage::Error "cannot read <what> '<path>'"
// ("cannot read schedule table 'x.csv'") when it cannot be opened or read.
std::string readFile(const std::string& path, const std::string& what);

}  // namespace ppstage
