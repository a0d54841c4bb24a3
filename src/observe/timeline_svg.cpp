// See include/ppstage/observe/timeline_svg.h.
#include "ppstage/observe/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace ppstage {
namespace {

// Layout, in pixels.
constexpr double kWidth = 1200;
constexpr double kMinNameWidth = 150;   // row names, left of the plot
constexpr double kNameCharWidth = 7.5;  // of a 13 px sans-serif character, about
constexpr double kRight = 20;
constexpr double kTop = 58;  // below the title lines
constexpr double kRowHeight = 34;
constexpr double kBoxHeight = 26;
constexpr double kAxisHeight = 40;
constexpr double kLegendRow = 20;
constexpr double kMinLabelWidth = 13;  // narrower boxes are not labelled

const char* baseColour(BoxKind kind) {
  switch (kind) {
    case BoxKind::kForward: return "#4e79a7";
    case BoxKind::kBackward: return "#59a14f";
    case BoxKind::kInputGrad: return "#76b7b2";
    case BoxKind::kWeightGrad: return "#f28e2b";
    case BoxKind::kPost: return "#9c755f";
    case BoxKind::kWait: return "#e15759";
    case BoxKind::kGradientSync: return "#b07aa1";
    case BoxKind::kAllReduce: return "#79706e";
    case BoxKind::kOptimizer: return "#edc948";
    case BoxKind::kTensorParallel: return "#ff9da7";
    case BoxKind::kRecompute: return "#bab0ac";
  }
  return "#000000";
}

// The kind's colour ("#rrggbb"), darkened by 28% per shade step (a rank's later stages).
std::string colour(BoxKind kind, int shade) {
  const char* hex = baseColour(kind);
  if (shade <= 0) return hex;
  unsigned rgb = 0;
  std::sscanf(hex + 1, "%x", &rgb);
  const double factor = std::pow(0.72, shade);
  char out[8];
  std::snprintf(out, sizeof out, "#%02x%02x%02x",
                static_cast<unsigned>(((rgb >> 16) & 0xff) * factor),
                static_cast<unsigned>(((rgb >> 8) & 0xff) * factor),
                static_cast<unsigned>((rgb & 0xff) * factor));
  return out;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:  // control characters are not XML
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

// A tick spacing of 1, 2 or 5 x 10^k giving at most about `ticks` ticks over `span` (> 0).
double tickStep(double span, int ticks) {
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

std::string number(double x) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", std::abs(x) < 1e-12 ? 0.0 : x);
  return out;
}

// Where times go: the plot spans [left, kWidth - kRight], the row names sit left of it.
struct Scale {
  double begin, end;
  double left;
  double x(double t) const { return left + (t - begin) / (end - begin) * (kWidth - left - kRight); }
};

void drawRow(std::ostringstream& svg, const TimelineRow& row, double y, const Scale& scale) {
  svg << "<text x=\"" << scale.left - 8 << "\" y=\"" << y + kRowHeight / 2 + 4
      << "\" text-anchor=\"end\" class=\"name\">" << escape(row.name) << "</text>\n";
  svg << "<rect x=\"" << scale.left << "\" y=\"" << y + (kRowHeight - kBoxHeight) / 2
      << "\" width=\"" << kWidth - scale.left - kRight << "\" height=\"" << kBoxHeight
      << "\" class=\"idle\"/>\n";
  for (const TimelineBox& box : row.boxes) {
    const double x0 = scale.x(std::max(box.start, scale.begin));
    const double x1 = scale.x(std::min(box.end, scale.end));
    if (x1 < x0) continue;
    const double width = std::max(x1 - x0, 0.5);  // an instant still shows
    const double top = y + (kRowHeight - kBoxHeight) / 2;
    svg << "<rect x=\"" << x0 << "\" y=\"" << top << "\" width=\"" << width << "\" height=\""
        << kBoxHeight << "\" fill=\"" << colour(box.kind, box.shade)
        << "\" stroke=\"#ffffff\" stroke-width=\"0.6\"><title>" << escape(box.tooltip)
        << "</title></rect>\n";
    if (!box.label.empty() && width >= kMinLabelWidth) {
      svg << "<text x=\"" << x0 + width / 2 << "\" y=\"" << top + kBoxHeight / 2 + 4
          << "\" text-anchor=\"middle\" class=\"label\">" << escape(box.label) << "</text>\n";
    }
  }
}

void drawAxis(std::ostringstream& svg, const Timeline& timeline, double y, const Scale& scale) {
  svg << "<line x1=\"" << scale.left << "\" y1=\"" << y << "\" x2=\"" << kWidth - kRight
      << "\" y2=\"" << y << "\" class=\"axis\"/>\n";
  const double step = tickStep(scale.end - scale.begin, 10);
  for (double t = std::ceil(scale.begin / step) * step; t <= scale.end + step * 1e-9; t += step) {
    const double x = scale.x(t);
    svg << "<line x1=\"" << x << "\" y1=\"" << y << "\" x2=\"" << x << "\" y2=\"" << y + 5
        << "\" class=\"axis\"/><text x=\"" << x << "\" y=\"" << y + 17
        << "\" text-anchor=\"middle\" class=\"tick\">" << number(t) << "</text>\n";
  }
  svg << "<text x=\"" << (scale.left + kWidth - kRight) / 2 << "\" y=\"" << y + 33
      << "\" text-anchor=\"middle\" class=\"tick\">time (" << escape(timeline.unit) << ")</text>\n";
}

// The kinds present, the idle background, and a note on shades when a rank has several
// stages; wraps to a new line when the width is used up.
double drawLegend(std::ostringstream& svg, const Timeline& timeline, double y, const Scale& scale) {
  std::set<BoxKind> kinds;
  int max_shade = 0;
  for (const TimelineRow& row : timeline.rows) {
    for (const TimelineBox& box : row.boxes) {
      kinds.insert(box.kind);
      max_shade = std::max(max_shade, box.shade);
    }
  }
  std::vector<std::pair<std::string, std::string>> entries;  // colour, text
  for (BoxKind kind : kinds) entries.emplace_back(baseColour(kind), legendText(kind));
  entries.emplace_back("#f0f0f0", "idle");
  if (max_shade > 0) entries.emplace_back(colour(BoxKind::kForward, 1), "darker: a later stage");
  double x = scale.left;
  for (const auto& [fill, text] : entries) {
    const double width = 22 + 6.5 * static_cast<double>(text.size()) + 18;
    if (x + width > kWidth - kRight) {
      x = scale.left;
      y += kLegendRow;
    }
    svg << "<rect x=\"" << x << "\" y=\"" << y - 10 << "\" width=\"14\" height=\"12\" fill=\""
        << fill << "\" stroke=\"#999999\" stroke-width=\"0.5\"/><text x=\"" << x + 20 << "\" y=\""
        << y << "\" class=\"tick\">" << escape(text) << "</text>\n";
    x += width;
  }
  return y + kLegendRow;
}

}  // namespace

bool isCompute(BoxKind kind) {
  return kind == BoxKind::kForward || kind == BoxKind::kBackward || kind == BoxKind::kInputGrad ||
         kind == BoxKind::kWeightGrad;
}

const char* legendText(BoxKind kind) {
  switch (kind) {
    case BoxKind::kForward: return "F forward";
    case BoxKind::kBackward: return "B backward";
    case BoxKind::kInputGrad: return "I input gradient";
    case BoxKind::kWeightGrad: return "W weight gradient";
    case BoxKind::kPost: return "send/recv posted";
    case BoxKind::kWait: return "waiting for send/recv";
    case BoxKind::kGradientSync: return "gradient sync";
    case BoxKind::kAllReduce: return "step all-reduce";
    case BoxKind::kOptimizer: return "optimizer";
    case BoxKind::kTensorParallel: return "tp all-reduce";
    case BoxKind::kRecompute: return "recompute";
  }
  return "?";
}

std::string renderTimelineSvg(const Timeline& timeline) {
  size_t longest_name = 0;
  for (const TimelineRow& row : timeline.rows)
    longest_name = std::max(longest_name, row.name.size());
  const Scale scale{
      timeline.begin, timeline.end > timeline.begin ? timeline.end : timeline.begin + 1,
      std::max(kMinNameWidth, kNameCharWidth * static_cast<double>(longest_name) + 16)};
  const double rows_bottom = kTop + kRowHeight * static_cast<double>(timeline.rows.size());
  std::ostringstream body;
  body.precision(6);
  for (size_t r = 0; r < timeline.rows.size(); ++r) {
    drawRow(body, timeline.rows[r], kTop + kRowHeight * static_cast<double>(r), scale);
  }
  for (const TimelineMark& mark : timeline.marks) {
    const double x = scale.x(mark.at);
    body << "<line x1=\"" << x << "\" y1=\"" << kTop - 4 << "\" x2=\"" << x << "\" y2=\""
         << rows_bottom << "\" class=\"mark\"/><text x=\"" << x + 3 << "\" y=\"" << kTop - 6
         << "\" class=\"tick\">" << escape(mark.label) << "</text>\n";
  }
  drawAxis(body, timeline, rows_bottom + 4, scale);
  const double height = drawLegend(body, timeline, rows_bottom + kAxisHeight + 18, scale) + 4;

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << kWidth << " " << height
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      << "<style>.name{font-size:13px;fill:#222222}.label{font-size:11px;fill:#ffffff}"
         ".tick{font-size:11px;fill:#444444}.title{font-size:15px;font-weight:bold;fill:#222222}"
         ".sub{font-size:12px;fill:#555555}.idle{fill:#f0f0f0}"
         ".axis{stroke:#666666;stroke-width:1}"
         ".mark{stroke:#999999;stroke-width:1;stroke-dasharray:3,3}</style>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      << "<text x=\"12\" y=\"20\" class=\"title\">" << escape(timeline.title) << "</text>\n"
      << "<text x=\"12\" y=\"38\" class=\"sub\">" << escape(timeline.subtitle) << "</text>\n"
      << body.str() << "</svg>\n";
  return svg.str();
}

}  // namespace ppstage
