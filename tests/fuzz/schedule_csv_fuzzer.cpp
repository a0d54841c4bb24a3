// libFuzzer target: any text as a schedule table must give a schedule or a ppstage::Error,
// never a crash, a hang or another exception. Parser, lowering, validator and simulator.
// Build and run: see tests/fuzz/CMakeLists.txt and docs/cli.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ppstage/schedule/pipeline_schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ppstage::scheduleFromTable(text, "fuzz.csv", ppstage::ScheduleOptions{});
  } catch (const ppstage::Error&) {
    // Rejected with a message: what bad input must get.
  }
  return 0;
}
