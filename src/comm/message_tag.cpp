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

// Layout, low to high bits: tensor (7) | micro-batch (14) | stage (7) | kind (2) = 30 bits.
int MessageTag::encode() const {
  PPSTAGE_CHECK(stage >= 0 && stage <= kMaxStage, "stage ", stage, " does not fit a message ",
                "tag (at most ", kMaxStage, ")");
  PPSTAGE_CHECK(microbatch >= 0 && microbatch <= kMaxMicrobatch, "micro-batch ", microbatch,
                " does not fit a message tag (at most ", kMaxMicrobatch, ")");
  PPSTAGE_CHECK(tensor >= 0 && tensor <= kMaxTensor, "boundary tensor ", tensor,
                " does not fit a message tag (at most ", kMaxTensor, " per boundary)");
  return tensor | microbatch << 7 | stage << 21 | static_cast<int>(kind) << 28;
}

MessageTag MessageTag::decode(int encoded) {
  MessageTag tag;
  tag.tensor = encoded & kMaxTensor;
  tag.microbatch = encoded >> 7 & kMaxMicrobatch;
  tag.stage = encoded >> 21 & kMaxStage;
  tag.kind = static_cast<MessageKind>(encoded >> 28 & 3);
  return tag;
}

std::string MessageTag::describe() const {
  return detail::concat(toString(kind), " ", tensor, " of stage ", stage, ", micro-batch ",
                        microbatch);
}

}  // namespace ppstage
