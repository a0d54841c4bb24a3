// See include/ppstage/core/host_name.h.
#include "ppstage/core/host_name.h"

#include <unistd.h>

#include <fstream>

namespace ppstage {

std::string thisHostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "?";
  return host;
}

std::string thisMachineId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (std::getline(in, id) && !id.empty()) return id;
  return thisHostName();
}

}  // namespace ppstage
