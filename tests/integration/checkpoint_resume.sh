#!/usr/bin/env bash
# Checkpoints, against the uninterrupted run (docs/cli.md, "Checkpoints"):
#   - resume on the same layout is bitwise: 8 steps straight against 4 + 4 (AdamW, SGD with
#     momentum, AdamW in compile mode stage), losses and final parameters;
#   - resume continues a learning-rate schedule (warm-up, cosine decay) bitwise;
#   - a fresh run refuses a checkpoint directory that holds checkpoints (exit 2);
#   - a pp 2 checkpoint resumes at pp 1, pp 4, pp 2 x dp 2, with zb-h1 and in compile mode
#     block: the next step's loss within 1e-6;
#   - a truncated tensor file or a missing manifest in the newest checkpoint: the one
#     before it is used, with a warning;
#   - another model's checkpoint is refused with exit 2, naming the tensor;
#   - export: one TorchScript file holding the trained tensors, whose forward equals the
#     chained stages' (checked by ppstage, and by Python's torch.jit.load where
#     PPSTAGE_PYTHON has torch: CTest passes the environment of scripts/install-deps.sh).
#
# usage: checkpoint_resume.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
cd "$work"

common=(--train.batch_size 8 --pipeline.microbatches 4 --output.log_every 0 --train.threads 1
        --comm.timeout_s 60)
train() {  # processes, train options...
  local processes=$1
  shift
  "${mpiexec[@]}" -np "$processes" "$ppstage" train "${common[@]}" "$@"
}
same() {  # name, reference.json, candidate.json, rtol
  if "$ppstage" compare-runs --reference "$2" --candidate "$3" --rtol "$4" > "$1.cmp"; then
    echo "ok: $1 ($(grep -m1 losses "$1.cmp"))"
  else
    fail "$1"; cat "$1.cmp"
  fi
}

# --- same layout: bitwise ------------------------------------------------------------------
# bf16: the checkpoint holds the fp32 master weights and their state; resumed, the bf16
# stages are rounded from them again.
for optimizer in adamw sgd adamw-stage adamw-bf16; do
  opts=(--train.optimizer "${optimizer%-*}")
  [ "$optimizer" = sgd ] && opts+=(--train.momentum 0.9 --train.lr 0.05)
  [ "$optimizer" = adamw-stage ] && opts+=(--compile.mode stage)
  [ "$optimizer" = adamw-bf16 ] && opts+=(--train.precision bf16)
  train 2 "${opts[@]}" --train.steps 8 --output.metrics_json "straight-$optimizer.json" \
    --output.params_dir "straight-$optimizer" > /dev/null
  train 2 "${opts[@]}" --train.steps 4 --checkpoint.dir "ck-$optimizer" --checkpoint.every 2 \
    > /dev/null
  cp -r "ck-$optimizer" "ck-$optimizer-resumed"  # keeps ck-$optimizer as saved at step 4
  train 2 "${opts[@]}" --train.steps 8 --checkpoint.dir "ck-$optimizer-resumed" \
    --checkpoint.resume true --output.metrics_json "resumed-$optimizer.json" \
    --output.params_dir "resumed-$optimizer" > "resumed-$optimizer.log"
  grep -q "^resuming from ck-$optimizer-resumed/step-00000004 (saved at pp 2 x dp 1, 2 stages, 1f1b)" \
    "resumed-$optimizer.log" || fail "$optimizer: no 'resuming from' line"
  same "bitwise-$optimizer" "straight-$optimizer.json" "resumed-$optimizer.json" 0
done

# A learning-rate schedule continues exactly: 8 steps of warm-up and cosine decay saved at
# step 4 and 8; resumed from step 4, steps 5-8 are bitwise the straight run's, with the same
# learning rates.
sched=(--train.steps 8 --train.lr_schedule cosine --train.warmup_steps 3 --train.min_lr 0.0003)
train 2 "${sched[@]}" --checkpoint.dir ck-sched --checkpoint.every 4 \
  --output.metrics_json straight-sched.json --output.params_dir straight-sched > /dev/null
rm -rf ck-sched/step-00000008
train 2 "${sched[@]}" --checkpoint.dir ck-sched --checkpoint.resume true \
  --output.metrics_json resumed-sched.json --output.params_dir resumed-sched > /dev/null
same bitwise-lr-schedule straight-sched.json resumed-sched.json 0
"${PPSTAGE_PYTHON:-python3}" - <<'PY' || fail "lr schedule: the resumed run's learning rates differ"
import json
straight = json.load(open("straight-sched.json"))["learning_rates"]
resumed = json.load(open("resumed-sched.json"))["learning_rates"]
assert len(straight) == 8 and straight[4:] == resumed, (straight, resumed)
assert straight[0] < straight[2] and straight[7] == 0.0003, straight  # warm-up, then to min_lr
print("ok: lr schedule resumed:", " ".join(f"{lr:.3g}" for lr in straight))
PY

set +e
train 2 --train.steps 4 --checkpoint.dir ck-adamw > fresh.log 2>&1
code=$?
set -e
[ "$code" = 2 ] && grep -q "already holds checkpoints" fresh.log ||
  fail "a fresh run in a used checkpoint dir: exit $code"

# --- other layouts: the next step within 1e-6 ----------------------------------------------
reshard() {  # name, processes, train options...
  local name=$1 processes=$2
  shift 2
  rm -rf "ck-$name"
  mkdir "ck-$name"
  cp -r ck-adamw/step-00000004 "ck-$name/"
  train "$processes" --train.steps 5 --checkpoint.dir "ck-$name" --checkpoint.resume true \
    --output.metrics_json "$name.json" "$@" > "$name.log" || fail "$name: the run failed"
  same "reshard-$name" straight-adamw.json "$name.json" 1e-6
}
reshard pp1 1 --pipeline.stages 1
reshard pp4 4
reshard pp2xdp2 4 --train.dp 2
reshard zb-h1 2 --pipeline.schedule zb-h1
reshard block 2 --compile.mode block

# --- damaged newest checkpoints are skipped ------------------------------------------------
cp -r ck-adamw ck-truncated
truncate -s 1000 ck-truncated/step-00000004/tensors-stage1.pt
train 2 --train.steps 5 --checkpoint.dir ck-truncated --checkpoint.resume true > truncated.log
grep -q "warning: skipping incomplete checkpoint ck-truncated/step-00000004: tensors-stage1.pt has 1000 bytes" \
  truncated.log || fail "truncated: no warning"
grep -q "^resuming from ck-truncated/step-00000002" truncated.log || fail "truncated: not step 2"
cp -r ck-adamw ck-no-manifest
rm ck-no-manifest/step-00000004/manifest.json
train 2 --train.steps 5 --checkpoint.dir ck-no-manifest --checkpoint.resume true > no-manifest.log
grep -q "skipping incomplete checkpoint ck-no-manifest/step-00000004: manifest.json is missing" \
  no-manifest.log || fail "no manifest: no warning"
grep -q "^resuming from ck-no-manifest/step-00000002" no-manifest.log || fail "no manifest: not step 2"
echo "ok: damaged checkpoints skipped"

# --- another model is refused ---------------------------------------------------------------
cp -r ck-adamw ck-other
set +e
train 2 --train.steps 6 --model.d_model 32 --checkpoint.dir ck-other --checkpoint.resume true \
  > other.log 2>&1
code=$?
set -e
[ "$code" = 2 ] || fail "another model: exit $code, not 2"
grep -q "ppstage: error: checkpoint ck-other/step-00000004 is not of this model: .*: checkpoint has \[.*\], model has \[" \
  other.log || { fail "another model: no line naming the tensor"; cat other.log; }
grep -q "^step" other.log && fail "another model: a step ran"
echo "ok: another model refused ($(grep -m1 'ppstage: error' other.log))"

# --- export ---------------------------------------------------------------------------------
"$ppstage" export --checkpoint.dir ck-adamw-resumed --out model.pt --example_out example.pt > export.log
cat export.log
grep -q "forward check: .* max abs diff 0$" export.log || fail "export: forward differs"
if "${PPSTAGE_PYTHON:-python3}" -c 'import torch' 2> /dev/null; then
  "${PPSTAGE_PYTHON:-python3}" - <<'PY' || fail "export: python check"
import glob, torch
model = torch.jit.load("model.pt")
state = model.state_dict()
saved = {}
for f in glob.glob("ck-adamw-resumed/step-00000008/tensors-stage*.pt"):
    saved.update(torch.load(f))
assert saved, "no tensors"
for path, tensor in saved.items():
    assert torch.equal(state[path], tensor), path
example = torch.load("example.pt")
out = model(example["input"])
out = out[0] if isinstance(out, tuple) else out
diff = (out - example["output"]).abs().max().item()
assert diff <= 1e-6, diff
print(f"ok: python loads model.pt: {len(saved)} tensors equal, forward max abs diff {diff}")
PY
else
  echo "skip: no torch in ${PPSTAGE_PYTHON:-python3}; the Python side of export is not checked"
fi
# Export with other model options than the run's: refused as another model, with what to
# give, not with an error of the split the checkpoint's layout asks for.
if "$ppstage" export --checkpoint.dir ck-adamw-resumed --model.layers 1 --out other.pt \
  > export-other.log 2>&1; then
  fail "export of another model succeeded"
fi
grep -q "ppstage: error: checkpoint .* is not of this model: .*give export the run's model options" \
  export-other.log || { fail "export of another model: no line saying so"; cat export-other.log; }
echo "ok: export of another model refused ($(grep -m1 'ppstage: error' export-other.log))"

exit "$failed"
