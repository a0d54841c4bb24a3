#!/usr/bin/env bash
# Sets up everything a fresh Debian 12 machine lacks, builds ppstage and runs its main job:
# `mpirun -np 2 ppstage train` — the built-in byte-level GPT (configs/gpt-tiny.ini) cut into
# 2 pipeline stages, one per rank, trained with 1F1B on the public-domain text embedded in
# ppstage. It ends with the loss going down (mean of the first vs the last 10 steps), and
# draws the run: the planned timeline (ppstage schedule --svg) and the measured one of its
# median step (the run's --output.trace, ppstage timeline --svg), into the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build=${PPSTAGE_BUILD_DIR:-build}
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DPPSTAGE_BUILD_TESTS=ON > "$build/configure.log" ||
  { cat "$build/configure.log"; exit 1; }
grep -- "-- ppstage:" "$build/configure.log"  # LibTorch, CUDA, cuDNN, NCCL, devices
cmake --build "$build" -j "${PPSTAGE_JOBS:-2}" --target ppstage
echo
echo "$ ppstage --version"
"$build/src/ppstage" --version

metrics=$(mktemp --suffix=.json)
trap 'rm -f "$metrics"' EXIT
echo
echo "$ mpirun -np 2 ppstage train --config configs/gpt-tiny.ini --output.trace $build/demo-trace.json"
mpirun --allow-run-as-root --oversubscribe -np 2 "$build/src/ppstage" train \
  --config configs/gpt-tiny.ini --train.threads 1 --output.metrics_json "$metrics" \
  --output.trace "$build/demo-trace.json"

# The loss went down: first 10 steps against the last 10, from the metrics file.
read -r first last < <(tr -d ' \n' < "$metrics" | sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p' |
  tr ',' '\n' | awk '{ v[NR] = $1 } END {
    for (i = 1; i <= 10; i++) { f += v[i]; l += v[NR - 10 + i] }
    printf "%.4f %.4f\n", f / 10, l / 10 }')
echo
echo "mean loss of the first 10 steps: $first, of the last 10: $last"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f) }' || {
  echo "the loss did not go down" >&2; exit 1; }
echo "the loss went down."

echo
echo "$ ppstage timeline --trace $build/demo-trace.json --svg $build/demo-measured.svg"
"$build/src/ppstage" timeline --trace "$build/demo-trace.json" --svg "$build/demo-measured.svg"
echo "$ ppstage schedule --pipeline.schedule 1f1b --pipeline.stages 2 --pipeline.microbatches 4 --svg $build/demo-planned.svg"
"$build/src/ppstage" schedule --pipeline.schedule 1f1b --pipeline.stages 2 \
  --pipeline.microbatches 4 --svg "$build/demo-planned.svg" > /dev/null
echo "planned and measured timelines: $build/demo-planned.svg, $build/demo-measured.svg"
