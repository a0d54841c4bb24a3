// bf16 instructions from /proc/cpuinfo (core/cpu_features.h): what train's start-up warning
// about slow bf16 rests on.
#include "ppstage/core/cpu_features.h"

#include <gtest/gtest.h>

namespace ppstage {
namespace {

TEST(CpuFeatures, FindsBf16InstructionsAmongX86FlagsAndArmFeatures) {
  const std::string avx2_only =
      "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n"
      "bugs\t\t: sysret_ss_attrs\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2\n";
  EXPECT_EQ(bf16InstructionsIn(avx2_only), "");
  const std::string zen4 = "flags\t\t: avx2 avx512f avx512_bf16 avx512_vnni\n";
  EXPECT_EQ(bf16InstructionsIn(zen4), "avx512_bf16");
  const std::string sapphire = "flags\t\t: avx512_bf16 amx_bf16 amx_tile\nflags\t\t: amx_bf16\n";
  EXPECT_EQ(bf16InstructionsIn(sapphire), "amx_bf16,avx512_bf16");
  const std::string neoverse = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n";
  EXPECT_EQ(bf16InstructionsIn(neoverse), "bf16");
  // A word elsewhere (a model name, bugs) is no instruction.
  EXPECT_EQ(bf16InstructionsIn("model name\t: bf16 avx512_bf16 chip\nbugs\t: bf16\n"), "");
  EXPECT_NE(thisCpusBf16Instructions(), "?");  // Linux has /proc/cpuinfo
}

}  // namespace
}  // namespace ppstage
