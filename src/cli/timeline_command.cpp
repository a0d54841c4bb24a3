// `ppstage timeline`: draw the measured timeline of a traced run (--output.trace) as SVG,
// and print where each rank's time went.
#include "commands.h"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "ppstage/config/options.h"
#include "ppstage/core/error.h"
#include "ppstage/core/file.h"
#include "ppstage/observe/chrome_trace.h"
#include "ppstage/observe/timelines.h"

namespace ppstage::cli {
namespace {

// Per row: compute, waiting and everything else traced, and idle (untraced) time.
void printTimeSplit(const Timeline& t) {
  std::printf("%s\n", t.title.c_str());
  for (const TimelineRow& row : t.rows) {
    double compute = 0, wait = 0, other = 0;
    for (const TimelineBox& box : row.boxes) {
      const double ms = box.end - box.start;
      if (isCompute(box.kind)) {
        compute += ms;
      } else if (box.kind == BoxKind::kWait) {
        wait += ms;
      } else {
        other += ms;
      }
    }
    const double idle = std::max(0.0, t.end - t.begin - compute - wait - other);
    std::printf(
        "  %-28s compute %9.3f ms  waiting %9.3f ms  comm/sync/optimizer %8.3f ms  "
        "idle %8.3f ms\n",
        row.name.c_str(), compute, wait, other, idle);
  }
}

}  // namespace

int timelineMain(int argc, const char* const* argv) {
  std::string trace_path, svg_path, step = "median";
  po::options_description options("Timeline");
  auto add = options.add_options();
  add("trace", po::value(&trace_path)->required(),
      "the trace of a run (ppstage train --output.trace FILE.json)");
  add("svg", po::value(&svg_path), "draw the timeline to this SVG file");
  add("step", po::value(&step)->default_value(step),
      "which step: a step number as the log prints it (1 is the first), median (the step of "
      "median length) or all");
  const char* usage =
      "usage: ppstage timeline --trace FILE.json [--svg OUT.svg] [--step N|median|all]\n\n"
      "Reads a trace written by ppstage train --output.trace and prints, per rank, the time\n"
      "the chosen step spent computing (F, B, I, W), waiting for sends and receives, in the\n"
      "gradient sync, all-reduce and optimizer, and idle. With --svg, draws it: ranks are\n"
      "rows, actions boxes coloured by kind and labelled with the micro-batch, gaps idle\n"
      "time, a time axis in ms. ppstage schedule --svg draws the planned timeline the same\n"
      "way.";
  if (!parseOptions(argc, argv, options, usage, std::cout)) return 0;
  const Timeline timeline = measuredTimeline(readChromeTrace(trace_path), step);
  printTimeSplit(timeline);
  if (!svg_path.empty()) {
    writeFileAtomically(svg_path, renderTimelineSvg(timeline));
    std::printf("wrote %s\n", svg_path.c_str());
  }
  return 0;
}

}  // namespace ppstage::cli
