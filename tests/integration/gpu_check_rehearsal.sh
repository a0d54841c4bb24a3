#!/usr/bin/env bash
# The GPU check (scripts/gpu/check.sh) rehearsed on the CPU, as the developers' guide asks
# before a GPU's minutes are spent: packed into a directory of its own as for the GPU
# machine, then run with PPSTAGE_GPU_REHEARSAL=1 (--train.device cpu) and, where this
# machine allows a mount namespace, with its own Open MPI and every packed library hidden
# (scripts/gpu/without_host_libraries.sh), as on the GPU machine. The PyTorch peer runs
# eager only: torch.compile's inductor takes minutes on two cores. Must end with
# "N passed, 0 failed" and N > 0.
#
# usage: gpu_check_rehearsal.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1
build_dir=$2
if [[ -z ${PPSTAGE_PYTHON:-} ]] || ! "$PPSTAGE_PYTHON" -c 'import torch' 2> /dev/null; then
  echo "SKIP: no Python with torch (PPSTAGE_PYTHON), which check.sh finds LibTorch's libraries by"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$source_dir/scripts/gpu/pack.sh" "$build_dir" "$work/pack" > "$work/pack.log" 2>&1 ||
  { cat "$work/pack.log"; exit 1; }
hide=()
mkdir "$work/probe"
if unshare --mount --propagation private mount -t tmpfs none "$work/probe" 2> /dev/null; then
  hide=("$source_dir/scripts/gpu/without_host_libraries.sh" "$work/pack")
else
  echo "no mount namespace here: the rehearsal runs with this machine's Open MPI visible"
fi
PPSTAGE_GPU_REHEARSAL=1 PYTHON="$PPSTAGE_PYTHON" GPU_PACK="$work/pack" OUT="$work/out" \
  PEER_WAYS=eager "${hide[@]}" bash "$source_dir/scripts/gpu/check.sh" > "$work/check.log" 2>&1
summary=$(tail -n 1 "$work/check.log")
echo "$summary"
[[ $summary =~ ^([1-9][0-9]*)\ passed,\ 0\ failed ]] ||
  { cat "$work/check.log" "$work/out/gpu_tests.log" "$work/out/runs.log"; exit 1; }
