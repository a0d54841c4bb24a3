// See include/ppstage/comm/message_tag.h.
#include "ppstage/comm/message_tag.h"

#include "ppstage/core/error.h"

namespace ppstage {

const char* toString(MessageKind kind) {
  switch (kind) {
    case MessageKind::kActivation: return "activation";
    case MessageKind::kGradient: return "gradient";
    case MessageKind::kMetadata: return "metadata";
    case MessageKind::kControl: return "control message";
  }
  return "message";
}

namespace {

// The tag's fields, low bits first: tensor (7) | micro-batch (14) | stage (7) | kind (2).
constexpr int kTensorBits = 7;
constexpr int kMicrobatchShift = kTensorBits;
constexpr int kStageShift = kMicrobatchShift + kMicrobatchIndexBits;
constexpr int kKindShift = kStageShift + kStageIndexBits;
static_assert(kKindShift + 2 <= 31, "a message tag must fit 31 bits");
static_assert(MessageTag::kMaxTensor == (1 << kTensorBits) - 1, "tensor field width");

}  // namespace

int MessageTag::encode() const {
  PPSTAGE_CHECK(stage >= 0 && stage <= kMaxStage, "stage ", stage, " does not fit a message ",
                "tag (at most ", kMaxStage, ")");
  PPSTAGE_CHECK(microbatch >= 0 && microbatch <= kMaxMicrobatch, "micro-batch ", microbatch,
                " does not fit a message tag (at most ", kMaxMicrobatch, ")");
  PPSTAGE_CHECK(tensor >= 0 && tensor <= kMaxTensor, "boundary tensor ", tensor,
                " does not fit a message tag (at most ", kMaxTensor, " per boundary)");
  return tensor | microbatch << kMicrobatchShift | stage << kStageShift |
         static_cast<int>(kind) << kKindShift;
}

MessageTag MessageTag::decode(int encoded) {
  MessageTag tag;
  tag.tensor = encoded & kMaxTensor;
  tag.microbatch = encoded >> kMicrobatchShift & kMaxMicrobatch;
  tag.stage = encoded >> kStageShift & kMaxStage;
  tag.kind = static_cast<MessageKind>(encoded >> kKindShift & 3);
  return tag;
}

namespace {

const char* channelName(int channel) {
  switch (static_cast<ControlChannel>(channel)) {
    case ControlChannel::kBenchmark: return "bench-comm's ping-pong";
    case ControlChannel::kGatherLength: return "a gather's length";
    case ControlChannel::kGatherBytes: return "a gather's bytes";
    case ControlChannel::kClockPing: return "a clock alignment's ping";
    case ControlChannel::kClockPong: return "a clock alignment's answer";
    case ControlChannel::kTransferProbe: return "a boundary's transfer probe";
    case ControlChannel::kLinkProbe: return "the planner's link probe";
    case ControlChannel::kAllReduce: return "an all-reduce's chunk";
  }
  return nullptr;
}

}  // namespace

std::string MessageTag::describe() const {
  const char* channel = kind == MessageKind::kControl ? channelName(microbatch) : nullptr;
  if (channel != nullptr && stage == 0) return detail::concat("a control message (", channel, ")");
  return detail::concat(toString(kind), " ", tensor, " of stage ", stage, ", micro-batch ",
                        microbatch);
}

}  // namespace ppstage
