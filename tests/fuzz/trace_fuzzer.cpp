// libFuzzer target: any text as the trace `ppstage timeline --trace` reads gives a timeline
// of each step choice, drawn to SVG, or a ppstage::Error; never a crash, a hang or
// another exception.
#include "fuzz_input.h"
#include "ppstage/core/error.h"
#include "ppstage/observe/chrome_trace.h"
#include "ppstage/observe/timeline_svg.h"
#include "ppstage/observe/timelines.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ppstage::TraceFile trace;
  try {
    trace = ppstage::parseChromeTrace(ppstage::fuzz::textOf(data, size), "fuzz/trace.json");
  } catch (const ppstage::Error&) {
    return 0;  // not a ppstage trace, said so
  }
  for (const char* step : {"median", "all", "1", "2"}) {
    try {
      (void)ppstage::renderTimelineSvg(ppstage::measuredTimeline(trace, step));
    } catch (const ppstage::Error&) {
      // A step the trace does not have, or events no timeline can show, said so.
    }
  }
  return 0;
}
