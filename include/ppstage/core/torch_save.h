// The bytes of a torch.save file holding `value` (tensors, and dicts and lists of them), as
// every file ppstage writes for Python to read: checkpoint tensors, --output.params_dir,
// export's example. Python's torch.load reads it with its default weights_only=True (torch
// 2.6 on): the dicts and lists carry no TorchScript type tags, which that loader refuses.
// LibTorch's pickle_load reads it back (as generic dicts and lists). Tensors are written
// from the CPU, whatever device they are on: a file a GPU run wrote loads on a machine
// without one.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace ppstage {

std::string torchSaveBytes(const c10::IValue& value);

}  // namespace ppstage
