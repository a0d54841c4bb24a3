#!/usr/bin/env bash
# --train.shard_optimizer (train/sharded_optimizer.h, Note [Sharded optimizer state]): at
# pp 2 x dp 2 with AdamW and clipping, the built-in gpt trains 4 steps sharded with
# per-step losses and final parameters within 1e-6 of the same run unsharded (compare-runs),
# and each rank's optimizer_state_mb is half the unsharded one's. A checkpoint of the
# sharded run resumes at dp 1 (pp 2, unsharded) as an unsharded run's checkpoint does, and
# at dp 2 sharded as 8 steps unsharded without a stop. At dp 1 the option warns once and
# changes nothing.
#
# usage: shard_numerics.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"

gpt=(--model.name gpt --model.layers 4 --model.d_model 32 --model.heads 4 --model.vocab_size 64
     --model.seq_len 16 --model.dropout 0.1 --data.path synthetic --train.optimizer adamw
     --train.grad_clip 0.5 --train.batch_size 8 --pipeline.microbatches 2 --train.lr 0.01
     --output.log_every 0 --train.threads 1 --comm.timeout_s 60)

train() {  # name, processes, options...: writes $work/<name>.json and <name>/
  local name=$1 processes=$2
  shift 2
  rm -rf "${work:?}/$name"
  if ! "${mpiexec[@]}" -np "$processes" "$ppstage" train "${gpt[@]}" "$@" \
       --output.metrics_json "$work/$name.json" --output.params_dir "$work/$name" \
       > "$work/$name.log" 2>&1; then
    echo "FAILED to run: $name"; tail -5 "$work/$name.log"; failed=1; return 1
  fi
}

train ref 4 --train.dp 2 --train.steps 4 &&
  train sharded 4 --train.dp 2 --train.steps 4 --train.shard_optimizer true &&
  compare_runs "pp 2 x dp 2, sharded" "$work/ref.json" "$work/sharded.json" --rtol 1e-6 \
    --atol 0
"${PPSTAGE_PYTHON:-python3}" - "$work/ref.json" "$work/sharded.json" <<'PY' || failed=1
import json, sys
ref, sharded = (json.load(open(p))["ranks"] for p in sys.argv[1:3])
for r, s in zip(ref, sharded):
    ratio = s["optimizer_state_mb"] / r["optimizer_state_mb"]
    assert 0.49 < ratio < 0.51, (r["optimizer_state_mb"], s["optimizer_state_mb"])
    assert r["master_weights_mb"] == 0 and s["master_weights_mb"] > 0, (r, s)
print("ok      optimizer state MB per rank, unsharded:",
      [round(r["optimizer_state_mb"], 4) for r in ref], "sharded:",
      [round(s["optimizer_state_mb"], 4) for s in sharded], "; masters sharded:",
      [round(s["master_weights_mb"], 4) for s in sharded])
PY

# A sharded run's checkpoint holds what an unsharded one holds: both resumed at dp 1 (4
# micro-batches of 2: the same samples and dropout keys as 2 replicas of 2) end alike; and
# resumed sharded at dp 2 it ends as 8 steps unsharded without a stop.
train long 4 --train.dp 2 --train.steps 8 &&
  train saved 4 --train.dp 2 --train.steps 4 --train.shard_optimizer true \
    --checkpoint.dir "$work/ck" --checkpoint.every 4 &&
  train saved-ref 4 --train.dp 2 --train.steps 4 --checkpoint.dir "$work/ck-ref" \
    --checkpoint.every 4 &&
  cp -r "$work/ck" "$work/ck2" &&
  train resumed-dp1 2 --train.dp 1 --pipeline.microbatches 4 --train.steps 8 \
    --checkpoint.dir "$work/ck" --checkpoint.resume true --checkpoint.every 0 &&
  train resumed-ref-dp1 2 --train.dp 1 --pipeline.microbatches 4 --train.steps 8 \
    --checkpoint.dir "$work/ck-ref" --checkpoint.resume true --checkpoint.every 0 &&
  compare_runs "sharded checkpoint resumed at dp 1, against an unsharded one" \
    "$work/resumed-ref-dp1.json" "$work/resumed-dp1.json" --rtol 1e-6 --atol 0
train resumed-dp2 4 --train.dp 2 --train.steps 8 --train.shard_optimizer true \
  --checkpoint.dir "$work/ck2" --checkpoint.resume true --checkpoint.every 0 &&
  compare_runs "sharded checkpoint resumed sharded" "$work/long.json" "$work/resumed-dp2.json" \
    --rtol 1e-6 --atol 0

# dp 1: one warning line, the same run.
train one 2 --train.steps 2 &&
  train one-sharded 2 --train.steps 2 --train.shard_optimizer true &&
  compare_runs "dp 1 with the option" "$work/one.json" "$work/one-sharded.json" --rtol 0 --atol 0
if [[ -f $work/one-sharded.log ]]; then
  warnings=$(grep -c "ppstage: warning: --train.shard_optimizer true at dp 1 does nothing" \
    "$work/one-sharded.log")
  [[ $warnings == 1 ]] || { echo "FAIL: $warnings warning lines at dp 1"; failed=1; }
fi
exit $failed
