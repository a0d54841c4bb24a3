// A pipeline timeline as an SVG picture: one row per rank, one box per action, coloured by
// kind and labelled with the micro-batch; gaps are idle time. `ppstage schedule --svg`
// draws the simulated schedule and `ppstage timeline --svg` a measured trace the same way
// (timelines.h builds both), so planned and measured can stand side by side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ppstage {

enum class BoxKind : uint8_t {
  kForward,
  kBackward,
  kInputGrad,
  kWeightGrad,
  kPost,  // posting a send or receive
  kWait,  // waiting for a send or receive
  kGradientSync,
  kAllReduce,
  kOptimizer,
  kTensorParallel,  // a tensor-parallel all-reduce, drawn over the compute it is part of
  kRecompute,       // a recomputed block's forward, drawn over the backward it is part of
};

// The legend's words: "F forward", "waiting for send/recv", ...
const char* legendText(BoxKind kind);
// F, B, I or W.
bool isCompute(BoxKind kind);

struct TimelineBox {
  double start = 0;  // in the timeline's unit
  double end = 0;
  BoxKind kind = BoxKind::kForward;
  std::string label;    // drawn inside when it fits: the micro-batch
  int shade = 0;        // the rank's v-th stage: later stages are drawn darker
  std::string tooltip;  // shown on hover ("1F3: stage 1, micro-batch 3, 12.3 ms")
};

struct TimelineRow {
  std::string name;  // "rank 1 (stage 1)"
  std::vector<TimelineBox> boxes;
};

// A vertical line across the rows, such as where a step begins.
struct TimelineMark {
  double at = 0;
  std::string label;
};

struct Timeline {
  std::string title;     // first line above the rows
  std::string subtitle;  // second line: what was run, what the figures are
  std::string unit;      // of the time axis: "ms", or "time units" for a simulation
  double begin = 0;      // the axis' range
  double end = 1;
  std::vector<TimelineRow> rows;
  std::vector<TimelineMark> marks;
};

// A standalone SVG document (XML). Text is escaped.
std::string renderTimelineSvg(const Timeline& timeline);

}  // namespace ppstage
