#!/usr/bin/env bash
# Activation recomputation (--train.recompute, compile/recompute.h) changes no number: the
# built-in gpt with dropout 0.1 trains 4 steps at pp 2 with 1F1B, interleaved 1F1B and
# ZB-H1, recomputing every block (full) or the ops between its matrix products
# (selective); `ppstage compare-runs` finds its per-step losses and final parameters
# bitwise equal to the same run without recomputation in compile mode none, and within
# 1e-6 relative in stage and block. The same at pp 2 x tp 2, in bf16 (ZB-H1), and on two
# models we did not write: the Llama-style fixture and ConvNeXt (stochastic depth: keyed
# random ops). The
# metrics JSON lists the recomputed blocks per stage and each rank's recompute_s, the log
# its start-up lines, and the trace its recompute events.
#
# usage: recompute_numerics.sh PPSTAGE "MPIEXEC ARGS" FIXTURES_DIR
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
fixtures=$3

gpt=(--model.name gpt --model.layers 4 --model.d_model 32 --model.heads 4 --model.vocab_size 64
     --model.seq_len 16 --model.dropout 0.1 --data.path synthetic)
settings=(--train.batch_size 8 --output.log_every 0 --train.threads 1 --comm.timeout_s 60
          --train.steps 4 --train.lr 0.01)

train() {  # name, processes, options...: writes $work/<name>.json and <name>/
  local name=$1 processes=$2
  shift 2
  rm -rf "${work:?}/$name"
  if ! "${mpiexec[@]}" -np "$processes" "$ppstage" train "${settings[@]}" "$@" \
       --output.metrics_json "$work/$name.json" --output.params_dir "$work/$name" \
       > "$work/$name.log" 2>&1; then
    echo "FAILED to run: $name"; tail -5 "$work/$name.log"; failed=1; return 1
  fi
}
# name, processes, tolerance, options...: the run without recomputation, then with each policy.
check() {
  local name=$1 processes=$2 tolerance=$3
  shift 3
  train "$name-ref" "$processes" "$@" || return
  for policy in full selective; do
    train "$name-$policy" "$processes" "$@" --train.recompute "$policy" || continue
    compare_runs "$name, $policy" "$work/$name-ref.json" "$work/$name-$policy.json" \
      --rtol "$tolerance" --atol 0 || true
  done
}

for schedule in 1f1b interleaved-1f1b zb-h1; do
  per_rank=1
  [[ $schedule == interleaved-1f1b ]] && per_rank=2
  check "gpt pp 2 $schedule none" 2 0 "${gpt[@]}" --pipeline.schedule "$schedule" \
    --pipeline.stages_per_rank "$per_rank" --pipeline.microbatches 4
done
for mode in stage block; do
  for schedule in 1f1b zb-h1; do
    check "gpt pp 2 $schedule $mode" 2 1e-6 "${gpt[@]}" --pipeline.schedule "$schedule" \
      --pipeline.microbatches 4 --compile.mode "$mode"
  done
done
check "gpt pp 2 x tp 2 1f1b none" 4 0 "${gpt[@]}" --train.tp 2 --pipeline.microbatches 4
check "gpt pp 2 zb-h1 bf16 none" 2 0 "${gpt[@]}" --train.precision bf16 \
  --pipeline.schedule zb-h1 --pipeline.microbatches 4
check "llama pp 2 zb-h1 none" 2 0 --model.name "$fixtures/real/llama.pt" --data.path synthetic \
  --model.vocab_size 64 --model.seq_len 16 --pipeline.schedule zb-h1 --pipeline.microbatches 4
check "convnext pp 2 1f1b none" 2 0 --model.name "$fixtures/real/convnext.pt" \
  --data.path synthetic --model.input_shape 8,3,32,32 --model.input_dtype float32 \
  --pipeline.microbatches 4

# The reports: the policy and blocks per stage, recompute_s per rank, the start-up lines and
# the trace's recompute events.
train "gpt-traced" 2 "${gpt[@]}" --pipeline.microbatches 4 --train.recompute full \
  --train.recompute_blocks every:2 --output.trace "$work/trace.json" --output.log_every 1 &&
  "${PPSTAGE_PYTHON:-python3}" - "$work/gpt-traced.json" "$work/trace.json" \
    "$work/gpt-traced.log" <<'PY' || failed=1
import json, sys
m = json.load(open(sys.argv[1]))
per_stage = m["recompute"]
assert [r["policy"] for r in per_stage] == ["full", "full"], per_stage
assert all(len(r["blocks"]) == 1 for r in per_stage), per_stage
assert all(r["recompute_s"] > 0 for r in m["ranks"]), m["ranks"]
events = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e.get("cat") == "recompute"]
# every:2 of 4 blocks, one per stage: one rerun per micro-batch per step on each rank.
assert len(events) == 2 * 4 * 4, len(events)
log = open(sys.argv[3]).read()
assert "recompute stage 0: full, 1 block (" in log, log
print("ok      reports: blocks", [r["blocks"] for r in per_stage], "; recompute_s",
      [round(r["recompute_s"], 4) for r in m["ranks"]], ";", len(events), "trace events")
PY

# ppstage split lists each stage's recomputed blocks; compare-compile gives recomputation's
# cost per compile mode, against each mode's run without it.
"$ppstage" split "${gpt[@]}" --pipeline.stages 2 --train.recompute selective \
  --train.recompute_blocks 1 --json > "$work/split.json" || failed=1
"${mpiexec[@]}" -np 2 "$ppstage" compare-compile "${gpt[@]}" "${settings[@]}" \
  --train.recompute full --json > "$work/compare.json" 2> "$work/compare.log" ||
  { echo "FAILED to run: compare-compile"; tail -3 "$work/compare.log"; failed=1; }
"${PPSTAGE_PYTHON:-python3}" - "$work/split.json" "$work/compare.json" <<'PY' || failed=1
import json, sys
split = json.load(open(sys.argv[1]))["recompute"]
assert split["policy"] == "selective", split
assert [len(s["blocks"]) for s in split["stages"]] == [1, 1], split
modes = json.load(open(sys.argv[2]))["modes"]
for m in modes:
    r = m["recompute"]
    assert r["recompute_s_per_step"] > 0 and r["step_time_s_without"] > 0, m
    assert m["peak_activation_mb"] < r["peak_activation_mb_without"], m
print("ok      split:", [s["blocks"] for s in split["stages"]], "; compare-compile:",
      [(m["mode"], round(m["recompute"]["peak_activation_mb_without"] / m["peak_activation_mb"], 2))
       for m in modes], "x less activation memory")
PY

exit $failed
