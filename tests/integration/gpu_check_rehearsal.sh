#!/usr/bin/env bash
# The GPU check (scripts/gpu/check.sh) rehearsed on the CPU, as the developers' guide asks
# before a GPU's minutes are spent: packed into a directory of its own as for the GPU
# machine, then run with PPSTAGE_GPU_REHEARSAL=1 (--train.device cpu). Must end with
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
summary=$(PPSTAGE_GPU_REHEARSAL=1 PYTHON="$PPSTAGE_PYTHON" GPU_PACK="$work/pack" OUT="$work/out" \
  bash "$source_dir/scripts/gpu/check.sh" 2>&1 | tail -n 1) || { echo "$summary"; cat "$work/out/gpu_tests.log"; exit 1; }
echo "$summary"
[[ $summary =~ ^([1-9][0-9]*)\ passed,\ 0\ failed ]] || { cat "$work/out/gpu_tests.log"; exit 1; }
