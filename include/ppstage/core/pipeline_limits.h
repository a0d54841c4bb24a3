// How large a pipeline can be, said once: a message tag (comm/message_tag.h) packs a stage
// index and a micro-batch index into a 31-bit transport tag, and the schedules refuse
// layouts whose indices would not fit (schedule/pipeline_schedule.h).
#pragma once

namespace ppstage {

inline constexpr int kStageIndexBits = 7;
inline constexpr int kMicrobatchIndexBits = 14;

inline constexpr int kMaxStages = 1 << kStageIndexBits;             // 128
inline constexpr int kMaxMicrobatches = 1 << kMicrobatchIndexBits;  // 16384

}  // namespace ppstage
