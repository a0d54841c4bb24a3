// libFuzzer target: any text as a checkpoint manifest gives a Manifest or a ppstage::Error,
// and a manifest it gives writes out to JSON that reads back to the same JSON.
#include "fuzz_input.h"
#include "ppstage/checkpoint/manifest.h"
#include "ppstage/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ppstage::Manifest manifest;
  try {
    manifest = ppstage::manifestFromJson(ppstage::fuzz::textOf(data, size), "fuzz/manifest.json");
  } catch (const ppstage::Error&) {
    return 0;  // rejected with a message: what a damaged manifest must get
  }
  const std::string json = ppstage::manifestToJson(manifest);
  const std::string again =
      ppstage::manifestToJson(ppstage::manifestFromJson(json, "the rewritten manifest"));
  ppstage::fuzz::require(again == json, "a manifest's JSON reads back to the same JSON");
  return 0;
}
