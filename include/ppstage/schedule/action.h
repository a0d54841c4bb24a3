// The schedule IR: what one rank does, in order, for one optimizer step.
//
// An Action is (kind, stage, micro-batch). Compute kinds: F (forward), B (full backward),
// I (backward for the stage input only) and W (backward for the weights only; I + W = B,
// split so zero-bubble schedules can defer W). Communication kinds, inserted by the
// lowering pass (lowering.h), name the stage that runs them:
//   SEND_F s m  stage s sends its output for micro-batch m to stage s+1
//   RECV_F s m  stage s receives its input for micro-batch m from stage s-1
//   SEND_B s m  stage s sends the gradient of its input to stage s-1
//   RECV_B s m  stage s receives the gradient of its output from stage s+1
// SEND and RECV post the transfer and return; the compute action that needs received data
// waits for it. Text form (CSV, logs): stage, kind, micro-batch: "1F3", "0B2", "2SEND_F5".
//
// The types and shorthands are header-only: schedule plugins use them without linking
// ppstage. kindName, toString and parseAction are ppstage_core's (src/schedule/action.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace ppstage {

enum class ActionKind : uint8_t {
  kForward,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kSendForward,
  kRecvForward,
  kSendBackward,
  kRecvBackward,
};

struct Action {
  ActionKind kind = ActionKind::kForward;
  int stage = 0;
  int microbatch = 0;

  bool isCompute() const { return kind <= ActionKind::kBackwardWeight; }
  bool isReceive() const {
    return kind == ActionKind::kRecvForward || kind == ActionKind::kRecvBackward;
  }
  bool operator==(const Action& o) const {
    return kind == o.kind && stage == o.stage && microbatch == o.microbatch;
  }
  bool operator!=(const Action& o) const { return !(*this == o); }
  bool operator<(const Action& o) const {
    return std::tie(stage, microbatch, kind) < std::tie(o.stage, o.microbatch, o.kind);
  }
};

// One rank's actions, in the order it runs them.
using ActionList = std::vector<Action>;

// Shorthands for schedule authors.
inline Action forwardOf(int stage, int mb) { return {ActionKind::kForward, stage, mb}; }
inline Action backwardOf(int stage, int mb) { return {ActionKind::kBackward, stage, mb}; }
inline Action inputGradOf(int stage, int mb) { return {ActionKind::kBackwardInput, stage, mb}; }
inline Action weightGradOf(int stage, int mb) { return {ActionKind::kBackwardWeight, stage, mb}; }

// "F", "B", "I", "W", "SEND_F", ...
const char* kindName(ActionKind kind);
// "1F3"
std::string toString(const Action& action);
// Parses "1F3"; throws ppstage::Error naming the text and, when given, where it was.
Action parseAction(std::string_view text, const std::string& where = "");

}  // namespace ppstage
