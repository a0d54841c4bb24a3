// Message tags: what a point-to-point message carries, as a typed value.
//
// A tag names the kind of payload, the pipeline boundary it crosses, the micro-batch and
// the tensor's index within the boundary, so that messages between the same pair of ranks
// can be posted and arrive in any order and still never be confused. Communicators encode
// it into the transport's integer tag; nothing else handles bare integers.
#pragma once

#include <cstdint>
#include <string>

#include "ppstage/core/pipeline_limits.h"

namespace ppstage {

enum class MessageKind : uint8_t {
  kActivation = 0,  // forward: stage-1's output -> stage's input
  kGradient = 1,    // backward: gradient of stage's input -> stage-1
  kMetadata = 2,    // boundary descriptions exchanged before the first step (tensors 0
                    // and 1); a micro-batch's shapes where lengths vary (2: its
                    // activations', 3: its gradients')
  kControl = 3,     // tests, benchmarks, anything outside the pipeline's data flow
};

const char* toString(MessageKind kind);

struct MessageTag {
  MessageKind kind = MessageKind::kControl;
  int stage = 0;  // the boundary in front of this stage (between stage-1 and stage)
  int microbatch = 0;
  int tensor = 0;  // index of the tensor within the boundary

  // Field ranges that fit a 31-bit tag (every MPI allows at least 2^15; Open MPI 2^31-1).
  static constexpr int kMaxStage = kMaxStages - 1;
  static constexpr int kMaxMicrobatch = kMaxMicrobatches - 1;
  static constexpr int kMaxTensor = (1 << 7) - 1;

  // Throws ppstage::Error when a field is out of range.
  int encode() const;
  static MessageTag decode(int encoded);
  // "activation 1 of stage 3, micro-batch 5"
  std::string describe() const;

  bool operator==(const MessageTag& other) const { return encode() == other.encode(); }
};

// What a control message is for. Exchanges of different purposes between the same ranks
// never match each other: the channel is the tag's micro-batch field.
enum class ControlChannel : uint8_t {
  kBenchmark,      // bench-comm's ping-pongs
  kGatherLength,   // gatherStrings (comm/agreement.h): a rank's byte count,
  kGatherBytes,    //   then its bytes
  kClockPing,      // alignClocks (observe/clock_alignment.h): a rank's ping,
  kClockPong,      //   rank 0's answer with its clock
  kTransferProbe,  // measureTransfers (comm/transfer_probe.h): a boundary's ping-pongs
  kLinkProbe,      // measureLinks (comm/link_probe.h): the planner's ping-pongs
  kAllReduce,      // ringAllReduceSum (comm/ring_all_reduce.h): the chunks of a sum
};

// The tag of a control message on `channel`.
constexpr MessageTag controlTag(ControlChannel channel) {
  return {MessageKind::kControl, 0, static_cast<int>(channel), 0};
}

}  // namespace ppstage
