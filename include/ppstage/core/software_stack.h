// The software stack under ppstage: for LibTorch, CUDA, cuDNN and NCCL, the version this
// binary was built against and the one this process loaded (with the file it came from), and
// the CUDA devices the process can see. `ppstage --version` prints it. A version built
// against that differs from the one loaded is the first thing to rule out when a run on
// another machine fails.
#pragma once

#include <string>
#include <vector>

namespace ppstage {

struct StackComponent {
  std::string name;    // "LibTorch", "CUDA runtime", "cuDNN", "NCCL"
  std::string built;   // the version built against; "-" where not built in
  std::string loaded;  // the version loaded in this process; "-" where none is
  std::string file;    // the shared library it was loaded from, where known
  std::string note;    // what else to know: "LibTorch's", "no CUDA driver", "not built"
};

struct SoftwareStack {
  std::vector<StackComponent> components;
  int cuda_devices = 0;
  std::string no_device_reason;  // why none is visible, when cuda_devices is 0
};

// Queries the loaded libraries; with a CUDA LibTorch this loads the CUDA runtime, cuDNN and
// NCCL but starts no GPU context. Never throws for a missing GPU or driver.
SoftwareStack softwareStack();

// A table, a component a line, then the devices line.
std::string describe(const SoftwareStack& stack);

// "13.0" from CUDA's 13000, "9.19.0" from cuDNN's 91900, "2.28.9" from NCCL's 22809.
std::string cudaVersionText(int version);
std::string cudnnVersionText(long version);
std::string ncclVersionText(int version);

}  // namespace ppstage
