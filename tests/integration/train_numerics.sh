#!/usr/bin/env bash
# Pipelined training matches the single-process run: for one model and one layout
# (pp x dp ranks), every built-in schedule in compile modes none, stage and block trains 10
# steps, and `ppstage compare-runs` checks each run's per-step losses and final parameters
# against a reference run of one process with one stage and one micro-batch in compile
# mode none (same model, data, seed and steps). So do that one process's runs in compile
# modes stage and block.
#
# usage: train_numerics.sh PPSTAGE "MPIEXEC ARGS" PP DP [model options...]
#
# NUMERICS_EXPECTED_SKIPS lists the schedules (interleaved-1f1b, zb-v: two stages per rank)
# that this model cannot run at this layout, having fewer splittable units than stages: each
# is reported as SKIP with the reason. Any other schedule that cannot be cut fails the test,
# and so does a listed one that can.
#
# With NUMERICS_SAME_MICROBATCHES=1 every reference run has as many micro-batches as the
# pipelined runs (2 x PP x DP over the global batch): random ops then draw the same numbers
# (see Note [Keyed random ops]), which models with dropout need.
#
# SGD: AdamW's first steps divide each gradient by its own magnitude, so a gradient that is
# mathematically zero (an attention key bias) turns float rounding into full-size updates;
# the AdamW runs below are checked with a per-tensor tolerance (see docs/benchmarks.md).
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
pp=$3
dp=$4
shift 4
model=("$@")
np=$((pp * dp))

base=(--train.steps 10 --train.batch_size 16 --output.log_every 0 --data.path synthetic
      --train.grad_clip 0.5 --train.threads 1 --comm.timeout_s 60)
common=("${base[@]}" --train.optimizer sgd --train.lr 0.1)
reference_mb=1
if [ "${NUMERICS_SAME_MICROBATCHES:-0}" = 1 ]; then reference_mb=$((2 * pp * dp)); fi

"$ppstage" train "${model[@]}" "${common[@]}" --pipeline.stages 1 --pipeline.microbatches "$reference_mb" \
  --output.metrics_json "$work/ref.json" --output.params_dir "$work/ref" > "$work/ref.log"

run() {  # name, processes, extra train options...
  local name=$1 processes=$2
  shift 2
  rm -rf "$work/run"
  if ! "${mpiexec[@]}" -np "$processes" "$ppstage" train "${model[@]}" "${common[@]}" \
       "$@" --output.metrics_json "$work/run.json" --output.params_dir "$work/run" \
       > "$work/run.log" 2>&1; then
    echo "FAILED to run: $name"; tail -5 "$work/run.log"; failed=1; return
  fi
  compare_runs "$name" "$work/ref.json" "$work/run.json" || true
}

expected_skips=" ${NUMERICS_EXPECTED_SKIPS:-} "
for schedule in gpipe 1f1b interleaved-1f1b zb-h1 zb-v; do
  stages=$pp
  placement=loop
  [ "$schedule" = zb-v ] && placement=v
  if [ "$schedule" = interleaved-1f1b ] || [ "$schedule" = zb-v ]; then stages=$((2 * pp)); fi
  expected=no
  [[ "$expected_skips" == *" $schedule "* ]] && expected=yes
  if ! why=$("$ppstage" split "${model[@]}" --pipeline.stages "$stages" 2>&1 > /dev/null); then
    why=${why#ppstage: error: }
    if [ "$expected" = yes ]; then
      echo "SKIP    $schedule: the model cannot be cut into $stages stages: $why"
    else
      echo "FAILED  $schedule: an unexpected skip: the model cannot be cut into $stages stages: $why"
      failed=1
    fi
    continue
  fi
  if [ "$expected" = yes ]; then
    echo "FAILED  $schedule: listed in NUMERICS_EXPECTED_SKIPS, but the model cuts into $stages stages"
    failed=1
  fi
  for mode in none stage block; do
    run "$schedule pp=$pp dp=$dp stages=$stages compile=$mode" "$np" --train.dp "$dp" \
      --pipeline.schedule "$schedule" --pipeline.stages "$stages" \
      --pipeline.placement "$placement" --pipeline.microbatches $((2 * pp)) --compile.mode "$mode"
  done
done

# One process, one stage: the compile modes against none, and block mode with dynamic
# shapes (one executor per block type for every shape).
for mode in stage block; do
  run "one process compile=$mode" 1 --pipeline.stages 1 --pipeline.microbatches "$reference_mb" \
    --compile.mode "$mode"
done
run "one process compile=block dynamic" 1 --pipeline.stages 1 --pipeline.microbatches "$reference_mb" \
  --compile.mode block --compile.dynamic true

# AdamW (the default optimizer). Against one process with the same micro-batches: losses
# within 1e-5, parameters within 1e-5 relative or lr * 0.1 * sqrt(steps) absolute per
# tensor. At dp 1 an untied model's run is bitwise the one process's; a tied embedding's
# gradient is summed in another order (each stage's copy over the micro-batches, then the
# copies, where one process adds both uses micro-batch by micro-batch), and so is every
# gradient at dp 2 (the replicas' sums, then their all-reduce). Where a gradient is
# mathematically zero (an attention key bias) Adam turns those last bits into steps of up
# to lr * 0.1 of random sign; over 10 steps gpt-tiny's qkv.bias moved by under 1e-5 and
# traced_gpt's at dp 2 by 1.4e-4 (docs/benchmarks.md, numerics). A wrong gradient moves a
# weight by about lr every step. Against one process with one micro-batch: losses only.
adamw_lr=0.003
adamw=("${base[@]}" --train.optimizer adamw --train.lr "$adamw_lr")
adamw_atol=$(awk -v lr="$adamw_lr" -v steps=10 'BEGIN { printf "%.2g", lr * 0.1 * sqrt(steps) }')
"$ppstage" train "${model[@]}" "${adamw[@]}" --pipeline.stages 1 \
  --pipeline.microbatches "$reference_mb" --output.metrics_json "$work/ref_adamw.json" > /dev/null
"$ppstage" train "${model[@]}" "${adamw[@]}" --pipeline.stages 1 \
  --pipeline.microbatches $((2 * pp * dp)) --output.metrics_json "$work/ref_adamw_same.json" \
  --output.params_dir "$work/ref_adamw_same" > /dev/null
rm -rf "$work/adamw"
"${mpiexec[@]}" -np "$np" "$ppstage" train "${model[@]}" "${adamw[@]}" \
  --train.dp "$dp" --pipeline.microbatches $((2 * pp)) --output.params_dir "$work/adamw" \
  --output.metrics_json "$work/adamw.json" > "$work/run.log" 2>&1 || { tail -5 "$work/run.log"; failed=1; }
if out=$("$ppstage" compare-runs --reference "$work/ref_adamw.json" --candidate "$work/adamw.json" 2>&1); then
  echo "ok      adamw 1f1b pp=$pp dp=$dp, losses against one micro-batch: $(echo "$out" | sed -n 's/^losses *//p')"
else
  echo "DIFFERS adamw"; echo "$out"; failed=1
fi
if out=$("$ppstage" compare-runs --reference "$work/ref_adamw_same.json" --candidate "$work/adamw.json" \
         --rtol 1e-5 --atol "$adamw_atol" 2>&1); then
  echo "ok      adamw 1f1b pp=$pp dp=$dp, against the same micro-batches (atol $adamw_atol): $(echo "$out" | sed -n 's/^losses *//p'); $(echo "$out" | sed -n 's/^parameters *//p')"
else
  echo "DIFFERS adamw, same micro-batches"; echo "$out"; failed=1
fi
exit $failed
