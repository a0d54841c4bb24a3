// libFuzzer target: any text as a neighbour's boundary description gives a BoundarySpec or
// a ppstage::Error; a spec it gives describes itself, serializes to text that reads back
// to the same spec, and has sizes for a micro-batch of one sample of one token.
#include "fuzz_input.h"
#include "ppstage/comm/boundary_spec.h"
#include "ppstage/core/error.h"

using ppstage::BoundarySpec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  BoundarySpec spec;
  try {
    spec = BoundarySpec::deserialize(ppstage::fuzz::textOf(data, size));
  } catch (const ppstage::Error&) {
    return 0;  // rejected with a message
  }
  (void)spec.describe();
  ppstage::fuzz::require(BoundarySpec::deserialize(spec.serialize()) == spec,
                         "a spec's text reads back to the same spec");
  for (const ppstage::TensorSpec& tensor : spec.tensors) (void)tensor.sizes(1, 1);
  return 0;
}
