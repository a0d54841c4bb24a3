#!/usr/bin/env bash
# Tensor parallelism matches one process: the built-in gpt (its attention and MLP regions
# sharded by the pass, parallel/tensor_parallel.h) trains 6 steps at tp 2 and tp 4, at
# pp 2 x tp 2 with 1F1B and ZB-H1, and at pp 2 x tp 2 x dp 2 (8 ranks), in compile modes
# none, stage and block, with dropout 0.1; `ppstage compare-runs` checks each run's
# per-step losses and final parameters (the shards gathered whole) within 1e-5 of one
# process running the same micro-batches (so that keyed dropout draws the same masks).
# Checkpoints hold whole tensors: saved at pp 2 x tp 2 after 3 steps (SGD with momentum, its
# state sharded too), resumed at pp 1 x tp 1 and at pp 1 x tp 4, the next steps match the
# uninterrupted run within 1e-5.
#
# usage: tp_numerics.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"

model=(--model.name gpt --model.layers 2 --model.d_model 32 --model.heads 4 --model.vocab_size 64
       --model.seq_len 16 --model.dropout 0.1 --data.path synthetic)
settings=(--train.batch_size 16 --output.log_every 0 --train.grad_clip 0.5 --train.threads 1
          --comm.timeout_s 60)
base=("${settings[@]}" --train.optimizer sgd --train.lr 0.1)
common=("${base[@]}" --train.steps 6)

reference() {  # micro-batches
  "$ppstage" train "${model[@]}" "${common[@]}" --pipeline.stages 1 --pipeline.microbatches "$1" \
    --output.metrics_json "$work/ref$1.json" --output.params_dir "$work/ref$1" > "$work/ref$1.log"
}
run() {  # name, processes, global micro-batches (the reference's), extra train options...
  local name=$1 processes=$2 microbatches=$3
  shift 3
  rm -rf "$work/run"
  if ! "${mpiexec[@]}" -np "$processes" "$ppstage" train "${model[@]}" "${common[@]}" \
       "$@" --output.metrics_json "$work/run.json" \
       --output.params_dir "$work/run" > "$work/run.log" 2>&1; then
    echo "FAILED to run: $name"; tail -5 "$work/run.log"; failed=1; return
  fi
  compare_runs "$name" "$work/ref$microbatches.json" "$work/run.json" || true
}

reference 2
reference 4
for mode in none stage block; do
  run "tp 2, $mode" 2 2 --train.tp 2 --pipeline.microbatches 2 --compile.mode "$mode"
  for schedule in 1f1b zb-h1; do
    run "pp 2 x tp 2, $schedule, $mode" 4 4 --train.tp 2 --pipeline.microbatches 4 \
      --pipeline.schedule "$schedule" --compile.mode "$mode"
  done
done
run "tp 4, stage" 4 2 --train.tp 4 --pipeline.microbatches 2 --compile.mode stage
run "pp 2 x tp 2 x dp 2, 1f1b, stage" 8 4 --train.tp 2 --train.dp 2 --pipeline.microbatches 2 \
  --pipeline.schedule 1f1b --compile.mode stage
run "pp 2 x tp 2 x dp 2, zb-h1, block" 8 4 --train.tp 2 --train.dp 2 --pipeline.microbatches 2 \
  --pipeline.schedule zb-h1 --compile.mode block

# The split report and the metrics say what was sharded and what the collectives cost.
grep -q "layers.0.attn sharded" "$work/run.log" || { echo "FAILED: no sharded region in the log"; failed=1; }
"${PPSTAGE_PYTHON:-python3}" - "$work/run.json" <<'PY' || failed=1
import json, sys
m = json.load(open(sys.argv[1]))
assert m["tp"] == 2, m["tp"]
ranks = m["ranks"]
assert len(ranks) == 8 and all(r["tp_all_reduces"] > 0 and r["tp_s"] > 0 for r in ranks), ranks
print("ok      metrics: tp", m["tp"], "; tp_all_reduces per step", [r["tp_all_reduces"] for r in ranks])
PY
# Evaluation (its eval-mode model sharded alike, sharing the training shards) and bf16 with
# AdamW (fp32 master weights sharded with their parameters): evaluation losses within 1e-5
# of one process's; bf16 losses within 1e-2 of one process's in bf16.
extra_run() {  # name, processes, options...
  local name=$1 processes=$2
  shift 2
  "${mpiexec[@]}" -np "$processes" "$ppstage" train "${common_model[@]}" "${settings[@]}" \
    --train.steps 6 "$@" \
    --output.metrics_json "$work/$name.json" > "$work/$name.log" 2>&1 \
    || { echo "FAILED to run: $name"; tail -3 "$work/$name.log"; failed=1; }
}
here=$(cd "$(dirname "$0")/../.." && pwd)
common_model=(--model.name gpt --model.layers 2 --model.d_model 32 --model.heads 4
              --model.vocab_size 256 --model.seq_len 16)
evaluation=(--pipeline.microbatches 4 --eval.every 3 --eval.batches 2 --train.optimizer sgd
            --data.path "$here/docs/cli.md" --data.val_path "$here/docs/architecture.md")
bf16=(--pipeline.microbatches 4 --train.precision bf16 --train.optimizer adamw --train.lr 0.01)
extra_run eval-ref 1 "${evaluation[@]}" --pipeline.stages 1
extra_run eval-tp 4 "${evaluation[@]}" --train.tp 2 --compile.mode stage
extra_run bf16-ref 1 "${bf16[@]}" --pipeline.stages 1
extra_run bf16-tp 4 "${bf16[@]}" --train.tp 2 --compile.mode stage
"${PPSTAGE_PYTHON:-python3}" - "$work" <<'PY' || failed=1
import json, sys
d = sys.argv[1]
ref, tp = (json.load(open(f"{d}/eval-{n}.json"))["eval"] for n in ("ref", "tp"))
assert len(ref) == len(tp) == 2, (ref, tp)
for r, t in zip(ref, tp):
    assert abs(r["loss"] - t["loss"]) <= 1e-5 * abs(r["loss"]), (r, t)
ref, tp = (json.load(open(f"{d}/bf16-{n}.json"))["losses"] for n in ("ref", "tp"))
assert all(abs(r - t) <= 1e-2 * abs(r) for r, t in zip(ref, tp)), (ref, tp)
print("ok      pp 2 x tp 2 evaluation:", [round(e["loss"], 6) for e in
      json.load(open(f"{d}/eval-tp.json"))["eval"]], "; bf16 + adamw losses:",
      [round(x, 4) for x in tp])
PY

# Checkpoints: saved sharded, resumed at other tensor-parallel layouts.
resume=(--train.momentum 0.9 --pipeline.microbatches 4)
"$ppstage" train "${model[@]}" "${common[@]}" "${resume[@]}" --pipeline.stages 1 \
  --output.metrics_json "$work/straight.json" --output.params_dir "$work/straight" > /dev/null
"${mpiexec[@]}" -np 4 "$ppstage" train "${model[@]}" "${base[@]}" "${resume[@]}" --train.tp 2 \
  --train.steps 3 --checkpoint.dir "$work/ck" --checkpoint.every 3 > /dev/null
for layout in "1 1" "4 4"; do
  read -r processes tp <<< "$layout"
  rm -rf "$work/ck-resumed" "$work/run" && cp -r "$work/ck" "$work/ck-resumed"
  "${mpiexec[@]}" -np "$processes" "$ppstage" train "${model[@]}" "${common[@]}" "${resume[@]}" \
    --train.tp "$tp" --pipeline.stages 1 --checkpoint.dir "$work/ck-resumed" \
    --checkpoint.resume true --output.metrics_json "$work/run.json" \
    --output.params_dir "$work/run" > "$work/resumed.log" 2>&1 || { tail -3 "$work/resumed.log"; failed=1; }
  grep -q "saved at pp 2 x dp 1 x tp 2" "$work/resumed.log" || { echo "FAILED: no 'saved at' line"; failed=1; }
  if out=$("$ppstage" compare-runs --reference "$work/straight.json" --candidate "$work/run.json" 2>&1); then
    echo "ok      resumed at tp $tp from pp 2 x tp 2: $(echo "$out" | sed -n 's/^losses *//p'); $(echo "$out" | sed -n 's/^parameters *//p')"
  else
    echo "DIFFERS resumed at tp $tp from pp 2 x tp 2"; echo "$out"; failed=1
  fi
done

exit $failed
