// See include/ppstage/core/file.h.
#include "ppstage/core/file.h"

#include <fstream>
#include <sstream>

#include "ppstage/core/error.h"

namespace ppstage {

std::string readFile(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  PPSTAGE_CHECK(file.good(), "cannot read ", what, " '", path, "'");
  std::ostringstream bytes;
  bytes << file.rdbuf();
  PPSTAGE_CHECK(!file.bad(), "cannot read ", what, " '", path, "'");
  return bytes.str();
}

}  // namespace ppstage
