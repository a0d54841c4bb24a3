// GoogleTest main for ppstage: one intra-op thread per process, as on the 2-core CI machine
// where two test processes run side by side.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  at::set_num_threads(1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
