// Out-of-line part of ppstage's checks (see include/ppstage/core/error.h).
#include "ppstage/core/error.h"

namespace ppstage::detail {

void throwInternalError(const char* file, int line, const char* condition,
                        const std::string& message) {
  std::string what =
      concat("internal error (a ppstage bug) at ", file, ":", line, ": ", condition, " failed");
  if (!message.empty()) what += ": " + message;
  throw InternalError(what);
}

}  // namespace ppstage::detail
