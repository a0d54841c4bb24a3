// core/ with LibTorch: the compute threads' settings.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "ppstage/core/compute_threads.h"

namespace ppstage {
namespace {

TEST(ComputeThreads, DenormalsAreFlushedToZero) {
  const auto product = [](float a, float b) {
    return (at::full({1}, a) * at::full({1}, b)).item<float>();
  };
  at::globalContext().setFlushDenormal(false);
  ASSERT_GT(product(1e-30f, 1e-10f), 0.0f);  // 1e-40: a denormal
  ASSERT_TRUE(flushDenormals());
  EXPECT_EQ(product(1e-30f, 1e-10f), 0.0f);             // a denormal result is 0
  EXPECT_EQ(product(1e-40f, 1e10f), 0.0f);              // and so is a denormal operand
  EXPECT_EQ(product(1e-20f, 1e-10f), 1e-20f * 1e-10f);  // normal numbers are not touched
  at::globalContext().setFlushDenormal(false);
}

}  // namespace
}  // namespace ppstage
