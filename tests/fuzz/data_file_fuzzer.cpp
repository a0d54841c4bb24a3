// libFuzzer target: any bytes as a data file (--data.path) open as a data set whose every
// sample reads, or are refused with a ppstage::Error; never a crash, a hang or another
// exception. The formats are found by magic number and name, as for a user's file.
//
// The first byte of an input chooses the file's name and options; the rest is the file:
//   bits 0-1  0: tokens.bin, 1: arrays.npy, 2: train-images-idx3-ubyte (its own labels
//             file too), 3: tensors.pt (torch.save's zip, read by LibTorch's unpickler)
//   bit 2     token files without a header: uint32 (else uint16)
//   bit 3     token files: documents ending in token 0 (--data.documents, --data.eot 0)
#include <ATen/ATen.h>

#include "fuzz_input.h"
#include "ppstage/config/config.h"
#include "ppstage/core/error.h"
#include "ppstage/data/data_files.h"
#include "ppstage/data/dataset.h"

namespace {

constexpr int64_t kSeqLen = 4;

// Reads the first and last sample of every field, and the integer fields' ranges.
void readSamples(const ppstage::Dataset& dataset) {
  const int64_t n = dataset.size();
  for (size_t f = 0; f < dataset.fields().size(); ++f) {
    for (int64_t index : {int64_t{0}, n - 1}) {
      if (index >= 0) (void)dataset.sample(f, index).sum();
    }
    (void)dataset.valueRange(f, -100);
  }
  (void)dataset.describe();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* kNames[] = {"tokens.bin", "arrays.npy", "train-images-idx3-ubyte",
                                 "tensors.pt"};
  const uint8_t choice = data[0];
  ppstage::DataConfig config;
  config.path =
      ppstage::fuzz::writeScratch(kNames[choice & 3], ppstage::fuzz::textOf(data + 1, size - 1));
  if ((choice & 3) == 2) config.targets = config.path;
  config.token_dtype = choice & 4 ? ppstage::TokenDtype::kUint32 : ppstage::TokenDtype::kUint16;
  if (choice & 8) {
    config.documents = true;
    config.eot = 0;
  }
  try {
    if (ppstage::isModelShaped(config)) return 0;  // text: the model's own tokenizer reads it
    readSamples(*ppstage::openDataFile(config, kSeqLen));
  } catch (const ppstage::Error&) {
    // Refused with a message: what a damaged data file must get.
  }
  return 0;
}
