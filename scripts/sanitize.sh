#!/usr/bin/env bash
# Builds ppstage with AddressSanitizer and UndefinedBehaviorSanitizer (CMake option
# PPSTAGE_SANITIZE=address,undefined, in build-asan/) and runs under them: the unit tests
# and three mpirun tests, a pipelined training run against one process
# (train_numerics_gpt_tiny_pp2_dp1), checkpoints (checkpoint_resume) and traces (the TraceCli
# tests of train_cli_tests). Not part of CTest's CI run: the build alone takes about
# an hour on 2 cores.
#
#   scripts/sanitize.sh            build, then run them
#   scripts/sanitize.sh -R REGEX   build, then run the CTest tests matching REGEX instead
#
# Every suppression is in tests/sanitizers/lsan.supp, each with why it is not a leak.
# UBSan's vptr check is off (CMakeLists.txt): LibTorch does not export the typeinfo of all
# its classes, which that check needs to link.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/install-deps.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPPSTAGE_BUILD_TESTS=ON \
  -DPPSTAGE_SANITIZE=address,undefined > /dev/null
cmake --build build-asan -j2

# LibTorch and Open MPI are not built with the sanitizers: their allocations are checked,
# their code is not. Leak checking stays on, with the suppressions tests/sanitizers/lsan.supp
# explains. keep_loaded.so (tests/sanitizers/keep_loaded.c) keeps Open MPI's components
# loaded until exit, so that LeakSanitizer can name them; preloaded ahead of the ASan
# runtime, hence verify_asan_link_order=0.
cc -shared -fPIC -O2 -o build-asan/keep_loaded.so tests/sanitizers/keep_loaded.c
export LD_PRELOAD=$root/build-asan/keep_loaded.so
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0:verify_asan_link_order=0"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# mpirun passes the environment on to the ranks with -x.
export OMPI_MCA_mca_base_env_list="ASAN_OPTIONS;LSAN_OPTIONS;UBSAN_OPTIONS;LD_PRELOAD"

status=0
if [[ ${1:-} == -R ]]; then
  (cd build-asan && ctest -R "$2" --output-on-failure) || status=1
  exit "$status"
fi
for binary in core_tests schedule_tests unit_tests; do
  echo "== $binary"
  (cd build-asan/tests && "./$binary" --gtest_brief=1) || status=1
done
echo "== mpirun tests"
(cd build-asan && ctest --output-on-failure \
  -R '^train_numerics_gpt_tiny_pp2_dp1$|^checkpoint_resume$|^TraceCli\.') || status=1
exit "$status"
