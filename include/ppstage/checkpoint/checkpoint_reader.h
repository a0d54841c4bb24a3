// Reading the tensors of a complete checkpoint by original module path, whichever file (and
// so whichever stage of whichever layout) wrote them. Tensor files are LibTorch pickles,
// readable in Python with torch.load:
//   tensors-stage<s>.pt    Dict[str, Tensor]               stored path -> parameter or buffer
//   optimizer-stage<s>.pt  Dict[str, Dict[str, Tensor]]    stored path -> torch.optim state
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <map>
#include <string>

#include "ppstage/checkpoint/manifest.h"

namespace ppstage {

using TensorDict = std::map<std::string, at::Tensor>;
using StateDict = std::map<std::string, TensorDict>;

std::string pickleTensors(const TensorDict& tensors);
std::string pickleStates(const StateDict& states);

class CheckpointReader {
 public:
  // `dir` is "D/step-<8 digits>", `manifest` its (complete) manifest.
  CheckpointReader(std::string dir, Manifest manifest);

  const Manifest& manifest() const { return manifest_; }

  // The tensor stored under `path`. Throws ppstage::Error when the checkpoint has none.
  at::Tensor tensor(const std::string& path);
  // Its optimizer state (empty when it has none: a buffer, or a step never taken).
  TensorDict optimizerState(const std::string& path);

 private:
  const SavedTensor& entry(const std::string& path) const;
  const c10::IValue& file(const std::string& name);

  std::string dir_;
  Manifest manifest_;
  std::map<std::string, c10::IValue> files_;  // each file loaded once
};

}  // namespace ppstage
