#!/usr/bin/env bash
# Bad set-ups stop the configure with one line that says what is wrong (docs/build.md):
#   - a LibTorch whose headers need C++20 (2.13) under the C++17 build: names both;
#   - PPSTAGE_WITH_NCCL=ON with a CPU-only LibTorch;
#   - no LibTorch at all: the environment named does not exist.
# The LibTorch configs are stand-ins (tests/cmake/fake_torch_*): each configure stops
# before anything is built.
#
# usage: cmake_setup.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# expect_refusal NAME "TEXT" CMAKE-ARGS...: the configure fails and its error says TEXT.
expect_refusal() {
  local name=$1 text=$2
  shift 2
  if cmake -S "$source_dir" -B "$work/$name" "$@" > "$work/$name.log" 2>&1; then
    echo "FAILED: $name: the configure succeeded"
    failed=1
    return
  fi
  local line
  line=$(grep -A3 "CMake Error" "$work/$name.log" | tr -s ' \n' ' ')
  if [[ $line != *"$text"* ]]; then
    echo "FAILED: $name: expected '$text' in: $line"
    failed=1
    return
  fi
  echo "ok      $name: ${line#*: }"
}

expect_refusal cxx20 "LibTorch 2.13.0 ($source_dir/tests/cmake/fake_torch_2.13) needs C++20, but ppstage builds with C++17" \
  -DTorch_DIR="$source_dir/tests/cmake/fake_torch_2.13"
expect_refusal nccl_on_cpu "PPSTAGE_WITH_NCCL=ON, but LibTorch has no CUDA" \
  -DTorch_DIR="$source_dir/tests/cmake/fake_torch_cpu" -DPPSTAGE_WITH_NCCL=ON
PPSTAGE_VENV=$work/no-such-env CMAKE_PREFIX_PATH= expect_refusal no_libtorch \
  "no LibTorch found: $work/no-such-env does not exist; run scripts/install-deps.sh" \
  -DPPSTAGE_VENV="$work/no-such-env"
exit $failed
