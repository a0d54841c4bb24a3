#!/usr/bin/env bash
# The BERT most people write (tests/fixtures/data/masked_bert.pt: nn.TransformerEncoder
# called with src_key_padding_mask = attention_mask == 0, dropout 0.1) pipelined: split at
# every layer, trained with evaluation every 2 steps, against one process. torch.nn's fast
# paths (nested tensors, fused kernels), decided at run time inside the encoder, are
# ruled out by capture (src/graph/fast_paths.cpp), so the cut between layers exists and
# evaluation computes on dense tensors:
#   - pp 2 cut at encoder.layers.1 in compile modes none, stage and block, and pp 4 (every
#     layer its own stage) in none: per-step losses, final parameters and every evaluation
#     loss equal one process (rtol 1e-5);
#   - after a step at a learning rate of 1e-20, the one-process evaluation equals PyTorch's own model.eval()
#     loss (which takes the fast path) within 1e-5, where Python's torch is there.
#
# usage: masked_encoder.sh PPSTAGE "MPIEXEC ARGS" FIXTURES_DIR   (PPSTAGE_PYTHON: the Python
# with torch; CTest sets it)
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
data=$3/data
python=${PPSTAGE_PYTHON:-python3}

model=(--model.name "$data/masked_bert.pt" --data.path "$data/masked_bert_tokens.pt"
       --data.val_path "$data/masked_bert_tokens.pt" --train.batch_size 8
       --pipeline.microbatches 2 --train.steps 4 --eval.every 2 --eval.batches 4
       --train.optimizer sgd --train.lr 0.1 --train.threads 1 --output.log_every 0
       --comm.timeout_s 60)

# Every evaluation's loss of two metrics files, equal within 1e-5 relative.
same_evaluations() {  # name, reference.json, run.json
  python3 - "$@" <<'PY' || failed=1
import json, sys
name, ref, run = sys.argv[1:4]
a = [e["loss"] for e in json.load(open(ref))["eval"]]
b = [e["loss"] for e in json.load(open(run))["eval"]]
ok = len(a) == len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b))
print(("ok     " if ok else "DIFFERS"), name, "evaluations:", a, b)
sys.exit(0 if ok else 1)
PY
}

"$ppstage" train "${model[@]}" --pipeline.stages 1 --output.metrics_json "$work/ref.json" \
  --output.params_dir "$work/ref" > "$work/ref.log"
run() {  # name, ranks, options...
  local name=$1 ranks=$2
  shift 2
  rm -rf "$work/run"
  if ! "${mpiexec[@]}" -np "$ranks" "$ppstage" train "${model[@]}" "$@" \
       --output.metrics_json "$work/run.json" --output.params_dir "$work/run" \
       > "$work/run.log" 2>&1; then
    echo "FAILED to run: $name"; tail -5 "$work/run.log"; failed=1; return
  fi
  compare_runs "$name" "$work/ref.json" "$work/run.json" --rtol 1e-5 || true
  same_evaluations "$name" "$work/ref.json" "$work/run.json"
}
for mode in none stage block; do
  run "pp 2 at encoder.layers.1, compile $mode" 2 --pipeline.split_points encoder.layers.1 \
    --compile.mode "$mode"
done
run "pp 4, every layer a stage" 4 --pipeline.split_points encoder.layers.0,encoder.layers.1,encoder.layers.2

# PyTorch's own evaluation of the same model, on the same 4 batches (after one step at lr
# 1e-20, which leaves every parameter as saved).
if "$python" -c "import torch" 2> /dev/null; then
  "$ppstage" train "${model[@]}" --pipeline.stages 1 --train.lr 1e-20 --train.steps 1 \
    --eval.every 1 --output.metrics_json "$work/lr0.json" > "$work/lr0.log"
  "$python" - "$data" "$work/lr0.json" <<'PY' || failed=1
import json, sys, torch
data, metrics = sys.argv[1:3]
model = torch.jit.load(f"{data}/masked_bert.pt").eval()
d = torch.load(f"{data}/masked_bert_tokens.pt")
with torch.no_grad():
    losses = [torch.nn.functional.cross_entropy(
        model(d["input_ids"][i:i + 8], d["attention_mask"][i:i + 8]), d["labels"][i:i + 8]).item()
        for i in range(0, 32, 8)]
want = sum(losses) / len(losses)
got = json.load(open(metrics))["eval"][0]["loss"]
ok = abs(got - want) <= 1e-5 * abs(want)
print(("ok     " if ok else "DIFFERS"), f"evaluation against PyTorch's eval(): {got} and {want}")
sys.exit(0 if ok else 1)
PY
else
  echo "skipped the check against PyTorch's eval(): no torch in $python"
fi
exit $failed
