#!/usr/bin/env bash
# Bad set-ups end with one line that says what is wrong (docs/build.md). The configure:
#   - a LibTorch whose headers need C++20 (2.13) under the C++17 build: names both;
#   - PPSTAGE_WITH_NCCL=ON with a CPU-only LibTorch;
#   - a LibTorch older than the pinned one (Debian's 1.13);
#   - a CUDA LibTorch on a machine without nvcc;
#   - no LibTorch at all: the environment named does not exist.
# The LibTorch configs are stand-ins (tests/cmake/fake_torch_*): each configure stops
# before anything is built. And scripts/install-deps.sh with no network and no environment,
# in a network namespace of its own (skipped where one cannot be made).
#
# usage: bad_setup.sh CMAKE SOURCE_DIR
source "$(dirname "$0")/harness.sh"
cmake=$1
source_dir=$2

# expect_refusal NAME "TEXT" CMAKE-ARGS...: the configure fails and its error says TEXT.
expect_refusal() {
  local name=$1 text=$2
  shift 2
  if "$cmake" -S "$source_dir" -B "$work/$name" "$@" > "$work/$name.log" 2>&1; then
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
expect_refusal older "LibTorch 1.13.1 ($source_dir/tests/cmake/fake_torch_1.13) is older than 2.11.0" \
  -DTorch_DIR="$source_dir/tests/cmake/fake_torch_1.13"
PATH=/usr/bin:/bin CUDA_HOME= expect_refusal no_nvcc \
  "the LibTorch in $source_dir/tests/cmake/fake_torch_cuda is a CUDA build, whose CMake files need the CUDA toolkit's nvcc" \
  -DCMAKE_PREFIX_PATH="$source_dir/tests/cmake/fake_torch_cuda" "-DCMAKE_IGNORE_PATH=/usr/local/cuda/bin;/usr/local/bin"
PPSTAGE_VENV=$work/no-such-env CMAKE_PREFIX_PATH= expect_refusal no_libtorch \
  "no LibTorch found: $work/no-such-env does not exist; run scripts/install-deps.sh" \
  -DPPSTAGE_VENV="$work/no-such-env"
# No network to PyPI, no environment: one line, before anything is downloaded.
netns=ppstage-offline-$$
if ip netns add "$netns" 2> /dev/null; then
  if err=$(ip netns exec "$netns" env PPSTAGE_VENV="$work/offline-env" \
    "$source_dir/scripts/install-deps.sh" 2>&1 > /dev/null); then
    echo "FAILED: offline: install-deps succeeded"
    failed=1
  elif [[ $(wc -l <<< "$err") != 1 || $err != "install-deps: error: PyPI cannot be reached"* ]]; then
    echo "FAILED: offline: expected one line 'install-deps: error: PyPI cannot be reached ...', got: $err"
    failed=1
  else
    echo "ok      offline: $err"
  fi
  ip netns del "$netns"
else
  echo "skip    offline: no network namespace can be made here (ip netns add needs root)"
fi
exit $failed
