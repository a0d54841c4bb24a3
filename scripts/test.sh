#!/usr/bin/env bash
# Sets up everything a fresh Debian 12 machine lacks, builds ppstage with its tests and runs
# them all with CTest. Exits non-zero on any failure.
#   PPSTAGE_BUILD_DIR  build folder (default: build)
#   PPSTAGE_JOBS       parallel compile and test jobs (default: 2)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build=${PPSTAGE_BUILD_DIR:-build}
jobs=${PPSTAGE_JOBS:-2}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPPSTAGE_BUILD_TESTS=ON
cmake --build "$build" -j "$jobs"
cd "$build"
ctest --output-on-failure -j "$jobs"
