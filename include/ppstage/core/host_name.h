// This machine's host name, as a launcher's hostfile names it (gethostname).
#pragma once

#include <string>

namespace ppstage {

// "?" where the system gives none.
std::string thisHostName();

}  // namespace ppstage
