// See include/ppstage/core/host_name.h.
#include "ppstage/core/host_name.h"

#include <unistd.h>

namespace ppstage {

std::string thisHostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "?";
  return host;
}

}  // namespace ppstage
