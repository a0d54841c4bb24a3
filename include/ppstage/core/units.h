// The units every report and option shares: memory in MiB (what `--plan.memory_mb`, the
// plan's reports and train's tensor and RSS figures call "MB").
#pragma once

#include <cstdint>

namespace ppstage {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// `bytes` in MiB.
inline double mib(double bytes) { return bytes / kBytesPerMiB; }
inline double mib(int64_t bytes) { return mib(static_cast<double>(bytes)); }

}  // namespace ppstage
