// Schedule plugins: shared libraries exporting ppstage_register_schedules (schedule_api.h).
#pragma once

#include <string>

#include "ppstage/schedule/schedule_api.h"

namespace ppstage {

// dlopen()s `path` and calls its ppstage_register_schedules on `registry`. The library
// stays loaded: the registry keeps factories whose code lives in it. Throws ppstage::Error
// when it cannot be loaded or lacks the symbol.
void loadSchedulePlugin(ScheduleRegistry& registry, const std::string& path);

}  // namespace ppstage
