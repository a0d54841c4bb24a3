#!/usr/bin/env bash
# The soak: gpt-small (configs/gpt-small.ini) trained for 2,000 steps at mpirun -np 2 in
# each compile mode with 1F1B, and with ZB-H1, checkpointing every 100 steps, tracing on.
# Batches of 4 (4 micro-batches of 1 sample; PPSTAGE_SOAK_BATCH sets another size): a step
# makes the same allocations, messages and files as at the config's 16, in a quarter of
# the time. At 16 a step takes 3 s on 2 cores, and the four runs would take 7 hours.
# Reports per rank, from the run's metrics (--output.metrics_json):
#   - resident memory and tensor memory growth in MB per 1,000 steps after the warm-up (the
#     first 10% of the steps; rss_growth_mb_per_100_steps and
#     tensor_growth_mb_per_100_steps x 10: least-squares slopes over every step after it);
#   - open file descriptors after the first step and after the last;
# and per run: the step-time drift (the median of the last 200 steps over the median of
# the first 200 after the warm-up), and whether the run's last checkpoint before the end
# resumes bitwise: the final checkpoint is removed, the run resumes from the one before it
# (100 steps earlier) and must end with the same parameters, bit for bit.
# Prints markdown table rows for docs/benchmarks.md ("Soak"), and exits non-zero when a
# run misses the bounds: growth above 5 MB resident per 1,000 steps, any tensor growth
# (0.01 MB: the steady state allocates nothing that outlives a step), more descriptors at
# the end than after the first step, drift beyond 5%, or a resume that is not bitwise.
#
#   scripts/soak.sh                    2,000 steps, every run (about 30 minutes each here)
#   scripts/soak.sh 400 none zb-h1     400 steps, only these runs (none, stage, block: 1F1B
#                                      in that compile mode; zb-h1: ZB-H1, compile none)
#   PPSTAGE_SOAK_CONFIG=configs/gpt-tiny.ini scripts/soak.sh 400    another model
# Each run's metrics.json and logs are kept in build/soak/<run>/ (PPSTAGE_SOAK_RESULTS sets
# another folder). Not part of CTest. Runs the build in build/ (scripts/test.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
steps=${1:-2000}
shift || true
runs=("$@")
if ((${#runs[@]} == 0)); then runs=(none stage block zb-h1); fi
config=$root/${PPSTAGE_SOAK_CONFIG:-configs/gpt-small.ini}
batch=${PPSTAGE_SOAK_BATCH:-4}
ppstage=$root/build/src/ppstage
[[ -x $ppstage ]] || { echo "soak: build ppstage first (scripts/test.sh)"; exit 2; }
((steps >= 400 && steps % 100 == 0)) || { echo "soak: steps must be a multiple of 100, at least 400"; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each run's metrics (its step_time_s) and logs stay here for a second look.
results=${PPSTAGE_SOAK_RESULTS:-$root/build/soak}
mkdir -p "$results"

train() {
  mpirun --oversubscribe -np 2 "$ppstage" train --config "$config" --train.threads 1 \
    --train.steps "$steps" --train.batch_size "$batch" --checkpoint.every 100 --checkpoint.keep 2 --output.log_every 100 \
    "$@" < /dev/null
}

echo "| run | rank | RSS MB / 1000 steps | tensor MB / 1000 steps | open fds first → last | step-time drift | resume bitwise |"
echo "|---|---|---|---|---|---|---|"
status=0
for run in "${runs[@]}"; do
  case $run in
    none | stage | block) flags=(--compile.mode "$run" --pipeline.schedule 1f1b) ;;
    zb-h1) flags=(--compile.mode none --pipeline.schedule zb-h1) ;;
    *) echo "soak: unknown run '$run' (none, stage, block, zb-h1)"; exit 2 ;;
  esac
  dir=$work/$run
  mkdir -p "$dir"
  train "${flags[@]}" --checkpoint.dir "$dir/ck" --output.trace "$dir/trace.json" \
    --output.metrics_json "$dir/metrics.json" --output.params_dir "$dir/straight" \
    > "$dir/straight.log" 2>&1 || { echo "soak: $run failed:"; tail -5 "$dir/straight.log"; exit 1; }
  # The last checkpoint before the end: remove the final one, resume, end at the same step.
  last=$(printf "%s/ck/step-%08d" "$dir" "$steps")
  rm -rf "$last"
  train "${flags[@]}" --checkpoint.dir "$dir/ck" --checkpoint.resume true \
    --output.params_dir "$dir/resumed" > "$dir/resumed.log" 2>&1 ||
    { echo "soak: the resume of $run failed:"; tail -5 "$dir/resumed.log"; exit 1; }
  mkdir -p "$results/$run"
  cp "$dir/metrics.json" "$dir/straight.log" "$dir/resumed.log" "$results/$run/"
  bitwise=no
  if grep -q "^resuming from .*step-$(printf %08d $((steps - 100)))" "$dir/resumed.log" &&
    diff -r "$dir/straight" "$dir/resumed" > /dev/null; then
    bitwise=yes
  fi
  scripts/python - "$dir/metrics.json" "$run" "$bitwise" << 'PY' || status=1
import json, statistics, sys
metrics = json.load(open(sys.argv[1]))
run, bitwise = sys.argv[2], sys.argv[3]
times = metrics["step_time_s"]
warmup = max(3, len(times) // 10)
drift = statistics.median(times[-200:]) / statistics.median(times[warmup:warmup + 200]) - 1
ok = bitwise == "yes" and abs(drift) <= 0.05
for r in metrics["ranks"]:
    rss = 10 * r["rss_growth_mb_per_100_steps"]
    tensors = 10 * r["tensor_growth_mb_per_100_steps"]
    fds = (r["open_fds_start"], r["open_fds_end"])
    ok = ok and rss <= 5 and abs(tensors) < 0.01 and fds[1] <= fds[0]
    print(f"| {run} | {r['rank']} | {rss:+.2f} | {tensors:+.3f} | {fds[0]} → {fds[1]} "
          f"| {100 * drift:+.1f}% | {bitwise} |")
sys.exit(0 if ok else 1)
PY
done
exit "$status"
