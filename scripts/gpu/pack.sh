#!/usr/bin/env bash
# Packs what the GPU check (scripts/gpu/check.sh) runs into .gpu/ (ignored by git): the
# test binary tests/gpu built here, and every shared library it loads that a machine with
# only CUDA and PyTorch lacks (Debian's Open MPI, Boost.Program_options, protobuf, ...).
# LibTorch, CUDA, cuDNN and NCCL are not packed: the GPU machine's PyTorch 2.11.0+cu130
# wheel is the one built against here, and check.sh finds its libraries.
#
# usage: scripts/gpu/pack.sh [BUILD_DIR [PACK_DIR]]
#   BUILD_DIR: default build (gpu_tests is built first); PACK_DIR: default .gpu
# Then, on the GPU machine (the device tool, carrying .gpu): bash scripts/gpu/check.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
cmake --build "$build" -j2 --target gpu_tests
out=${2:-$root/.gpu}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/tests/gpu_tests" "$out/bin/"
# The libraries ldd resolves outside LibTorch's and NVIDIA's wheels, but for the C and C++
# runtimes every Linux has.
ldd "$out/bin/gpu_tests" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  while read -r name path; do
    case $path in */site-packages/*|/usr/local/cuda*) continue ;; esac
    case $name in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libutil.so.*|ld-linux*|\
      libstdc++.so.*|libgcc_s.so.*) continue ;;
    esac
    cp -L "$path" "$out/lib/$name"
  done
echo "packed $(du -sh "$out" | cut -f1) into $out: $(ls "$out/lib" | wc -l) libraries"
