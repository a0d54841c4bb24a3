#!/usr/bin/env bash
# Packs what the GPU check (scripts/gpu/check.sh) runs into .gpu/ (ignored by git): the
# test binary tests/gpu and the ppstage binary built here, every shared library they load
# that a machine with only CUDA and PyTorch lacks (Debian's Open MPI, Boost.Program_options,
# protobuf, ...), and Open MPI's runtime, relocated under .gpu/openmpi (OPAL_PREFIX): mpirun,
# orted, the components a one-host job over shared memory and TCP loads, and their help
# texts. LibTorch, CUDA, cuDNN and NCCL are not packed: the GPU machine's PyTorch
# 2.11.0+cu130 wheel is the one built against here, and check.sh finds its libraries.
#
# usage: scripts/gpu/pack.sh [BUILD_DIR [PACK_DIR]]
#   BUILD_DIR: default build (gpu_tests is built first); PACK_DIR: default .gpu
# Then, on the GPU machine (the device tool, carrying .gpu): bash scripts/gpu/check.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
cmake --build "$build" -j2 --target gpu_tests ppstage
out=${2:-$root/.gpu}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build/tests/gpu_tests" "$build/src/ppstage" "$out/bin/"

# Copies into $out/lib the libraries ldd resolves for each file given, outside LibTorch's
# and NVIDIA's wheels, but for the C and C++ runtimes every Linux has.
pack_libraries() {
  ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
      case $path in */site-packages/*|/usr/local/cuda*) continue ;; esac
      case $name in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libutil.so.*|ld-linux*|\
        libstdc++.so.*|libgcc_s.so.*) continue ;;
      esac
      [[ -e $out/lib/$name ]] || cp -L "$path" "$out/lib/$name"
    done
}
pack_libraries "$out/bin/gpu_tests" "$out/bin/ppstage"

# Open MPI 4.1 as Debian installs it (prefix /usr), relocated: with OPAL_PREFIX=$ompi it
# looks for its components in $ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 and its help
# texts in $ompi/share/openmpi; PMIx its components in $ompi/pmix2/lib/pmix (named by
# PMIX_MCA_mca_base_component_path: PMIx does not relocate them). The components
# for InfiniBand, UCX, libfabric and PSM are left out: none is used on one host, and their
# libraries would more than double the pack.
ompi=$out/openmpi
multiarch=lib/x86_64-linux-gnu
components=$ompi/$multiarch/openmpi/lib/openmpi3
mkdir -p "$ompi/bin" "$components" "$ompi/share" "$ompi/pmix2/lib"
cp -L /usr/bin/orterun "$ompi/bin/mpirun"
cp -L /usr/bin/orted "$ompi/bin/"
for component in /usr/$multiarch/openmpi/lib/openmpi3/*.so; do
  case ${component##*/} in *ucx*|*ofi*|*openib*|*psm*|*verbs*) continue ;; esac
  cp -L "$component" "$components/"
done
cp -r /usr/share/openmpi "$ompi/share/"
cp -rL /usr/$multiarch/pmix2/lib/pmix "$ompi/pmix2/lib/"
cp -r /usr/$multiarch/pmix2/share "$ompi/pmix2/"
pack_libraries "$ompi/bin/mpirun" "$ompi/bin/orted" "$components"/*.so "$ompi/pmix2/lib/pmix"/*.so
echo "packed $(du -sh "$out" | cut -f1) into $out: $(ls "$out/lib" | wc -l) libraries," \
  "$(ls "$components" | wc -l) Open MPI components"
