#!/usr/bin/env bash
# Every data format, every loss, a model with two inputs, bf16: a pipelined run matches the
# one-process run of the same data. For each case a reference of one process, one stage
# and one micro-batch (bf16: the pipelined run's micro-batches) trains 6 steps; the same
# job on 2 ranks (1F1B, 4 micro-batches) and, for some, on pp 2 x dp 2 must give the same
# per-step losses and final parameters (`ppstage compare-runs`, rtol 1e-5; bf16 1e-3). The class labels of the .npy case hold --train.ignore_index (-100) entries that
# fall unevenly into the micro-batches: only a loss that is the mean over the whole step's
# counted labels matches there. The fixtures are tests/fixtures/data (scripts/make_fixtures.py).
#
# usage: data_numerics.sh PPSTAGE "MPIEXEC ARGS" FIXTURES_DIR
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
data=$3/data

common=(--train.steps 6 --output.log_every 0 --train.threads 1 --comm.timeout_s 60
        --train.optimizer sgd --train.lr 0.1 --train.grad_clip 0.5)
resnet=(--model.name "$data/small_resnet.pt" --train.batch_size 16)
gpt=(--model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 --train.batch_size 8)

rtol=1e-5 atol=0 ref_microbatches=1
compare() {  # name
  compare_runs "$1" "$work/ref.json" "$work/run.json" --rtol "$rtol" --atol "$atol" || true
}
check() {  # name, "pp dp ...", train options...
  local name=$1 layouts=$2
  shift 2
  rm -rf "$work/ref" "$work/run"
  if ! "$ppstage" train "${common[@]}" "$@" --pipeline.stages 1 --pipeline.microbatches "$ref_microbatches" \
       --output.metrics_json "$work/ref.json" --output.params_dir "$work/ref" > "$work/ref.log" 2>&1; then
    echo "FAILED to run the reference of $name"; tail -5 "$work/ref.log"; failed=1; return
  fi
  grep -E "^  (train|data|precision) " "$work/ref.log" | sed "s/^/        $name: /"
  for layout in $layouts; do
    local dp=${layout#*x} np=$((2 * ${layout#*x}))
    rm -rf "$work/run"
    if ! "${mpiexec[@]}" -np "$np" "$ppstage" train "${common[@]}" "$@" --train.dp "$dp" \
         --output.metrics_json "$work/run.json" --output.params_dir "$work/run" > "$work/run.log" 2>&1; then
      echo "FAILED to run $name at pp 2 x dp $dp"; tail -5 "$work/run.log"; failed=1; continue
    fi
    compare "$name, pp 2 x dp $dp"
  done
}

check "npy folder, cross_entropy with ignored labels" "2x1 2x2" "${resnet[@]}" --data.path "$data/classes_npy"
check "npy x + targets, mse" "2x1" "${resnet[@]}" --data.path "$data/classes_npy/images.npy" \
  --data.targets "$data/onehot.npy"
check "torch.save tensors, cross_entropy" "2x1" "${resnet[@]}" --data.path "$data/classes.pt"
check "gzipped IDX, cross_entropy" "2x1" "${resnet[@]}" --data.path "$data/tiny-images-idx3-ubyte.gz"
check "uint16 tokens, next-token cross_entropy" "2x1 2x2" "${gpt[@]}" --data.path "$data/tokens_u16.bin"
check "llm.c token header" "2x1" "${gpt[@]}" --data.path "$data/tokens_header.bin" --data.format tokens
# Two inputs: Hugging Face's GPT-2 (scripted) takes input_ids and attention_mask, bound by
# name; the mask is used in every block, so it crosses the cut. Padding is labelled -100.
hf=(--model.name "$3/hf_gpt2.pt" --train.batch_size 8)
check "two inputs by name (torch.save)" "2x1 2x2" "${hf[@]}" --data.path "$data/masked_tokens.pt"
check "two inputs by --model.inputs (npy)" "2x1" "${hf[@]}" --data.path "$data/masked_npy" \
  --model.inputs input_ids=tokens,attention_mask=mask

# bf16 (--train.precision): pipelined against one process in bf16 with the same
# micro-batches (other micro-batches accumulate other bf16 roundings), losses within 1e-3
# and the fp32 master weights within 1e-3 beyond 1e-4 absolute (the tied embedding's two
# copies are summed in fp32 across stages, in bf16 within one).
rtol=1e-3 atol=1e-4 ref_microbatches=4
check "bf16, uint16 tokens" "2x1" "${gpt[@]}" --data.path "$data/tokens_u16.bin" --train.precision bf16
check "bf16, resnet classes, balanced by time" "2x1" "${resnet[@]}" --data.path "$data/classes.pt" \
  --train.precision bf16 --pipeline.balance time
ref_microbatches=8
check "bf16, uint16 tokens" "2x2" "${gpt[@]}" --data.path "$data/tokens_u16.bin" --train.precision bf16
rtol=1e-5 atol=0 ref_microbatches=1

# --train.loss model: the model takes the labels and returns its loss (in a dict, not
# first). The step's loss is the mean of its micro-batches' losses, so the reference has
# the pipelined runs' micro-batches: 4 at pp 2, 8 of one sample at pp 2 x dp 2.
model_loss=(--model.name "$3/hf_gpt2_loss.pt" --train.batch_size 8 --train.loss model
            --data.path "$data/masked_tokens.pt")
for layout in "1 4" "2 8"; do
  read -r dp microbatches <<< "$layout"
  rm -rf "$work/ref" "$work/run"
  if "$ppstage" train "${common[@]}" "${model_loss[@]}" --pipeline.stages 1 \
       --pipeline.microbatches "$microbatches" --output.metrics_json "$work/ref.json" \
       --output.params_dir "$work/ref" > "$work/ref.log" 2>&1 &&
     "${mpiexec[@]}" -np $((2 * dp)) "$ppstage" train "${common[@]}" "${model_loss[@]}" \
       --train.dp "$dp" --output.metrics_json "$work/run.json" --output.params_dir "$work/run" \
       > "$work/run.log" 2>&1; then
    grep -E "^  train " "$work/ref.log" | sed "s/^/        model loss: /"
    compare "model loss (labels in, loss out), pp 2 x dp $dp"
  else
    echo "FAILED: model loss at dp $dp"; tail -3 "$work/ref.log" "$work/run.log"; failed=1
  fi
done

# Evaluation (--eval.every): the pipelined eval losses equal one process's within 1e-5, and
# a run with evaluation trains bitwise as one without (its losses and parameters). With
# dropout (gpt) and GroupNorm (resnet): eval mode must not draw random numbers either. The
# reference has the pipelined runs' 4 micro-batches: dropout then draws the same numbers.
evaluated() {  # name, train options...
  local name=$1
  shift
  local eval=(--eval.every 3 --eval.batches 2)
  rm -rf "$work/ref" "$work/run" "$work/plain"
  "$ppstage" train "${common[@]}" "$@" "${eval[@]}" --pipeline.stages 1 --pipeline.microbatches 4 \
    --output.metrics_json "$work/ref.json" > "$work/ref.log" 2>&1 || { echo "FAILED: $name reference"; tail -3 "$work/ref.log"; failed=1; return; }
  "${mpiexec[@]}" -np 2 "$ppstage" train "${common[@]}" "$@" "${eval[@]}" \
    --output.metrics_json "$work/run.json" --output.params_dir "$work/run" > "$work/run.log" 2>&1 || { echo "FAILED: $name with eval"; tail -3 "$work/run.log"; failed=1; return; }
  "${mpiexec[@]}" -np 2 "$ppstage" train "${common[@]}" "$@" \
    --output.metrics_json "$work/plain.json" --output.params_dir "$work/plain" > "$work/plain.log" 2>&1 || { echo "FAILED: $name without eval"; tail -3 "$work/plain.log"; failed=1; return; }
  grep "^eval step" "$work/run.log" | sed "s/^/        $name: /"
  if "${PPSTAGE_PYTHON:-python3}" - "$work" <<'PY'; then echo "ok      $name: eval as one process, training bitwise as without eval"; else failed=1; fi
import json, sys
w = sys.argv[1]
ref, run, plain = (json.load(open(f"{w}/{n}.json")) for n in ("ref", "run", "plain"))
ok = True
if [e["step"] for e in run["eval"]] != [3, 6] or len(ref["eval"]) != 2:
    print("FAIL: evaluations at", [e["step"] for e in run["eval"]], "not after steps 3 and 6"); ok = False
for r, p in zip(ref["eval"], run["eval"]):
    if abs(r["loss"] - p["loss"]) > 1e-5 * abs(r["loss"]):
        print(f"FAIL: eval loss after step {r['step']}: {p['loss']} pipelined, {r['loss']} in one process"); ok = False
if run["losses"] != plain["losses"]:
    print("FAIL: training losses differ with evaluation:", run["losses"], plain["losses"]); ok = False
sys.exit(0 if ok else 1)
PY
  cmp -s "$work/run/params-rank0.pt" "$work/plain/params-rank0.pt" &&
    cmp -s "$work/run/params-rank1.pt" "$work/plain/params-rank1.pt" ||
    { echo "FAIL: $name: the final parameters differ with evaluation"; failed=1; }
}
evaluated "eval, model loss" "${model_loss[@]}" --data.val_path "$data/masked_tokens.pt"
evaluated "eval, resnet classes" "${resnet[@]}" --data.path "$data/classes_npy" --data.val_path "$data/classes.pt"
evaluated "eval, gpt with dropout" "${gpt[@]}" --model.dropout 0.1 --data.path "$data/tokens_u16.bin" \
  --data.val_path "$data/tokens_header.bin"

# A model trained on a data file exports: captured again on the data's samples, not on
# --model.input_shape's default token ids.
"$ppstage" train "${common[@]}" "${resnet[@]}" --data.path "$data/classes.pt" --pipeline.stages 1 \
  --checkpoint.dir "$work/ck" > "$work/ck.log" 2>&1 &&
  "$ppstage" export "${resnet[@]}" --data.path "$data/classes.pt" --checkpoint.dir "$work/ck" \
    --out "$work/exported.pt" > "$work/export.log" 2>&1 &&
  grep -q "forward check: .* max abs diff" "$work/export.log" &&
  echo "ok      export of a model trained on a data file: $(grep -o 'max abs diff .*' "$work/export.log")" ||
  { echo "FAIL: export of a model trained on a data file"; tail -3 "$work/ck.log" "$work/export.log"; failed=1; }

# The labels the .npy case ignores are ignored: its reference loss differs from the same
# job's with --train.ignore_index set to a value no label has (then -100 fails as a label).
"$ppstage" train "${common[@]}" "${resnet[@]}" --data.path "$data/classes_npy" --pipeline.stages 1 --train.ignore_index 99 > "$work/unignored.log" 2>&1 && {
  echo "FAIL: -100 labels were accepted with --train.ignore_index 99"; failed=1; }
grep -q "labels 'labels' go down to -100, which is neither a class (0 to 9) nor --train.ignore_index (99)" "$work/unignored.log" || { echo "FAIL: no label error"; cat "$work/unignored.log"; failed=1; }
exit "$failed"
