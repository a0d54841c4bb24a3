// Text form of actions (see include/ppstage/schedule/action.h).
#include "ppstage/schedule/action.h"

#include <cctype>

#include "ppstage/core/error.h"

namespace ppstage {
namespace {

constexpr ActionKind kKinds[] = {ActionKind::kForward,       ActionKind::kBackward,
                                 ActionKind::kBackwardInput, ActionKind::kBackwardWeight,
                                 ActionKind::kSendForward,   ActionKind::kRecvForward,
                                 ActionKind::kSendBackward,  ActionKind::kRecvBackward};

// Reads a non-negative decimal number (at most 9 digits) at `pos`; -1 when there is none.
int readNumber(std::string_view text, size_t& pos) {
  const size_t begin = pos;
  int value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) &&
         pos - begin < 9) {
    value = value * 10 + (text[pos] - '0');
    ++pos;
  }
  return pos == begin ? -1 : value;
}

}  // namespace

const char* kindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return "F";
    case ActionKind::kBackward: return "B";
    case ActionKind::kBackwardInput: return "I";
    case ActionKind::kBackwardWeight: return "W";
    case ActionKind::kSendForward: return "SEND_F";
    case ActionKind::kRecvForward: return "RECV_F";
    case ActionKind::kSendBackward: return "SEND_B";
    case ActionKind::kRecvBackward: return "RECV_B";
  }
  return "?";
}

std::string toString(const Action& action) {
  return std::to_string(action.stage) + kindName(action.kind) + std::to_string(action.microbatch);
}

Action parseAction(std::string_view text, const std::string& where) {
  const std::string at = where.empty() ? "" : where + ": ";
  size_t pos = 0;
  const int stage = readNumber(text, pos);
  size_t kind_end = pos;
  while (kind_end < text.size() &&
         (std::isupper(static_cast<unsigned char>(text[kind_end])) || text[kind_end] == '_')) {
    ++kind_end;
  }
  const std::string_view kind = text.substr(pos, kind_end - pos);
  pos = kind_end;
  const int microbatch = readNumber(text, pos);
  PPSTAGE_CHECK(stage >= 0 && microbatch >= 0 && pos == text.size(), at, "'", text,
                "' is not an action (stage, kind, micro-batch: 1F3, 0B2, 2SEND_F5)");
  for (ActionKind k : kKinds) {
    if (kind == kindName(k)) return Action{k, stage, microbatch};
  }
  PPSTAGE_FAIL(at, "unknown action kind '", kind, "' in '", text,
               "' (kinds: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B)");
}

}  // namespace ppstage
