// What this CPU computes fast that ppstage's choices depend on: bf16 dot-product
// instructions, read from /proc/cpuinfo. Without them LibTorch still computes in bf16, by
// converting to fp32 and back around every op, so `--train.precision bf16` can be slower
// than fp32 (docs/benchmarks.md, bf16 against fp32); train says so at start-up.
#pragma once

#include <string>

namespace ppstage {

// The bf16 instructions the text of /proc/cpuinfo lists ("avx512_bf16", "amx_bf16" among
// x86 flags; "bf16" among ARM features), comma-separated; "" for none.
std::string bf16InstructionsIn(const std::string& cpuinfo);

// bf16InstructionsIn of this machine's /proc/cpuinfo; "?" where it cannot be read.
std::string thisCpusBf16Instructions();

}  // namespace ppstage
