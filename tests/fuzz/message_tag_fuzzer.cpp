// libFuzzer target: any 31-bit transport tag decodes into fields in range that encode back
// to the same tag and describe themselves; any fields either encode into a tag that
// decodes to them or are refused with a ppstage::Error.
#include <cstring>

#include "fuzz_input.h"
#include "ppstage/comm/message_tag.h"
#include "ppstage/core/error.h"

using ppstage::MessageKind;
using ppstage::MessageTag;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int32_t words[4] = {0, 0, 0, 0};
  std::memcpy(words, data, size < sizeof(words) ? size : sizeof(words));
  // A tag as the transport hands it over (MPI tags are non-negative).
  const int encoded = words[0] & 0x3fffffff;
  const MessageTag decoded = MessageTag::decode(encoded);
  ppstage::fuzz::require(decoded.encode() == encoded, "decode then encode gives the tag back");
  ppstage::fuzz::require(!decoded.describe().empty(), "a decoded tag describes itself");
  // Fields as a caller sets them.
  MessageTag tag;
  tag.kind = static_cast<MessageKind>(static_cast<uint32_t>(words[0]) >> 30);
  tag.stage = words[1];
  tag.microbatch = words[2];
  tag.tensor = words[3];
  try {
    const MessageTag back = MessageTag::decode(tag.encode());
    ppstage::fuzz::require(back.kind == tag.kind && back.stage == tag.stage &&
                               back.microbatch == tag.microbatch && back.tensor == tag.tensor,
                           "encode then decode gives the fields back");
  } catch (const ppstage::Error&) {
    // A field out of range: refused with a message.
  }
  return 0;
}
