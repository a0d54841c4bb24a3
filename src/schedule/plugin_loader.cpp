// See include/ppstage/schedule/plugin_loader.h.
#include "ppstage/schedule/plugin_loader.h"

#include <dlfcn.h>

namespace ppstage {

void loadSchedulePlugin(ScheduleRegistry& registry, const std::string& path) {
  // Never dlclose: the registry keeps factories whose code lives in the library.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  PPSTAGE_CHECK(library != nullptr, "cannot load schedule plugin '", path, "': ", dlerror());
  void* symbol = dlsym(library, kRegisterSchedulesSymbol);
  PPSTAGE_CHECK(symbol != nullptr, "schedule plugin '", path, "' does not export ",
                kRegisterSchedulesSymbol, " (declare it extern \"C\", see ",
                "schedules/examples/)");
  reinterpret_cast<RegisterSchedulesFn>(symbol)(&registry);
}

}  // namespace ppstage
