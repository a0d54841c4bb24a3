// This machine's host name, as a launcher's hostfile names it (gethostname), and what tells
// one machine's processes from another's where host names do not (network namespaces).
#pragma once

#include <string>

namespace ppstage {

// "?" where the system gives none.
std::string thisHostName();

// The running kernel's boot id (/proc/sys/kernel/random/boot_id): the same for every
// process on this machine, its containers and network namespaces included, which share its
// cores; the host name where the system gives none.
std::string thisMachineId();

}  // namespace ppstage
