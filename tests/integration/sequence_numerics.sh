#!/usr/bin/env bash
# Micro-batches of different lengths (--data.seq_len_policy bucket | variable) through the
# pipeline: at PP ranks, with 1F1B and ZB-H1 in compile modes none, stage and block, every
# run's per-step losses (within 1e-5 relative) and final parameters match one process that
# pads the whole batch into one micro-batch, on the embedded text's paragraphs. Padding is
# masked out of the loss, and causal attention keeps it from every real token, so the
# lengths each micro-batch is padded to change nothing but the arithmetic's order.
#
# Then (with PP = 2) the warning for models that see the padding after a document, and the
# compiled graphs' specializations: 200 steps in 3 buckets give
# `stage` and `block` at most 3 executors per distinct graph; variable lengths give more
# than 3 with static shapes, and with --compile.dynamic true the counts on the step lines
# stop growing after the first steps.
#
# usage: sequence_numerics.sh PPSTAGE "MPIEXEC ARGS" PP
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
pp=$3

model=(--model.name gpt --model.layers 4 --model.d_model 32 --model.heads 4
       --model.vocab_size 256 --model.seq_len 64)
# Evaluation too, on the paragraphs of a text of our own, cut, ordered and padded the same way.
val=$(cd "$(dirname "$0")/../.." && pwd)/docs/cli.md
common=("${model[@]}" --train.steps 6 --train.batch_size 16 --output.log_every 0
        --train.threads 1 --comm.timeout_s 60 --train.optimizer sgd --train.lr 0.1
        --train.grad_clip 0.5 --eval.every 3 --eval.batches 2 --data.val_path "$val")

# The largest relative difference of two runs' evaluation losses; fails above 1e-5.
eval_losses_match() {
  "${PPSTAGE_PYTHON:-python3}" - "$1" "$2" <<'PY'
import json, sys
ref, run = (json.load(open(p))["eval"] for p in sys.argv[1:3])
assert len(ref) == len(run) > 0, f"{len(run)} evaluations, expected {len(ref)}"
diff = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(ref, run))
print(f"{len(ref)} evaluations, max rel diff {diff:.2e}")
sys.exit(diff > 1e-5)
PY
}

for policy in bucket variable; do
  "$ppstage" train "${common[@]}" --data.seq_len_policy "$policy" --pipeline.stages 1 \
    --pipeline.microbatches 1 --output.metrics_json "$work/ref.json" \
    --output.params_dir "$work/ref" > "$work/ref.log"
  for schedule in 1f1b zb-h1; do
    for mode in none stage block; do
      name="$policy $schedule pp=$pp compile=$mode"
      rm -rf "$work/run"
      if ! "${mpiexec[@]}" -np "$pp" "$ppstage" train "${common[@]}" \
           --data.seq_len_policy "$policy" --pipeline.schedule "$schedule" \
           --pipeline.microbatches $((2 * pp)) --compile.mode "$mode" \
           --output.metrics_json "$work/run.json" --output.params_dir "$work/run" \
           > "$work/run.log" 2>&1; then
        echo "FAILED to run: $name"; tail -5 "$work/run.log"; failed=1; continue
      fi
      if out=$("$ppstage" compare-runs --reference "$work/ref.json" --candidate "$work/run.json" 2>&1) &&
         eval_diff=$(eval_losses_match "$work/ref.json" "$work/run.json"); then
        echo "ok      $name: $(echo "$out" | sed -n 's/^losses *//p'); $(echo "$out" | sed -n 's/^parameters *//p'); eval $eval_diff"
      else
        echo "DIFFERS $name"; echo "$out"; failed=1
      fi
    done
  done
done
[ "$pp" = 2 ] || exit $failed

# Padding after a document is invisible to a causal model only: a bidirectional encoder
# (torch.nn's, no mask) is warned about, a GPT is not; both on a token file of documents.
fixtures=$(cd "$(dirname "$0")/.." && pwd)/fixtures
"${PPSTAGE_PYTHON:-python3}" - "$work/docs.bin" <<'PY'
import random, struct, sys
random.seed(1)
tokens = []
for _ in range(200):
    tokens += [random.randint(1, 63) for _ in range(random.randint(2, 30))] + [0]
open(sys.argv[1], "wb").write(struct.pack(f"<{len(tokens)}H", *tokens))
PY
for model in real/transformer_encoder.pt traced_gpt.pt; do
  "${mpiexec[@]}" -np 2 "$ppstage" train --model.name "$fixtures/$model" --model.vocab_size 64 \
    --model.seq_len 16 --data.path "$work/docs.bin" --data.eot 0 --data.seq_len_policy variable \
    --train.steps 1 --train.batch_size 8 --train.threads 1 > "$work/padding.log" 2>&1 \
    || { echo "FAILED to run: $model"; tail -5 "$work/padding.log"; failed=1; continue; }
  warned=no
  grep -q "warning:  the model's outputs at a token change with the tokens after it" \
    "$work/padding.log" && warned=yes
  expected=no
  [ "$model" = real/transformer_encoder.pt ] && expected=yes
  if [ "$warned" = "$expected" ]; then
    echo "ok      $model: warned that padding changes its outputs: $warned"
  else
    echo "FAILED  $model: warned that padding changes its outputs: $warned, expected $expected"
    failed=1
  fi
done

# The most executors one graph of any rank got, from a metrics JSON.
specializations() {
  "${PPSTAGE_PYTHON:-python3}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["compile"]["specializations_per_graph"])' "$1"
}
tiny=(--model.name gpt --model.layers 2 --model.d_model 16 --model.heads 2
      --model.vocab_size 256 --model.seq_len 64 --train.batch_size 8 --train.threads 1
      --comm.timeout_s 60)
for mode in stage block; do
  "${mpiexec[@]}" -np 2 "$ppstage" train "${tiny[@]}" --train.steps 200 --output.log_every 0 \
    --data.seq_len_policy bucket --data.buckets 16,32 --compile.mode "$mode" \
    --output.metrics_json "$work/buckets.json" > "$work/buckets.log" 2>&1 \
    || { echo "FAILED to run: buckets $mode"; tail -5 "$work/buckets.log"; failed=1; continue; }
  n=$(specializations "$work/buckets.json")
  if [ "$n" -ge 2 ] && [ "$n" -le 3 ]; then
    echo "ok      200 steps in buckets 16, 32, 64, compile=$mode: $n executors per graph at most"
  else
    echo "FAILED  200 steps in buckets 16, 32, 64, compile=$mode: $n executors for one graph (expected 2 or 3)"
    failed=1
  fi
done

for dynamic in false true; do
  "${mpiexec[@]}" -np 2 "$ppstage" train "${tiny[@]}" --train.steps 40 --output.log_every 1 \
    --data.seq_len_policy variable --compile.mode block --compile.dynamic "$dynamic" \
    --compile.max_respecializations 1000 --output.metrics_json "$work/variable.json" \
    > "$work/variable.log" 2>&1 \
    || { echo "FAILED to run: variable dynamic=$dynamic"; tail -5 "$work/variable.log"; failed=1; continue; }
  n=$(specializations "$work/variable.json")
  # "graphs 12  respec 0" on each step line: the counts so far over every rank.
  counts=$(sed -n 's/.*  graphs \([0-9]*\)  respec \([0-9]*\).*/\1 \2/p' "$work/variable.log")
  after_warmup=$(echo "$counts" | sed -n 5p)
  last=$(echo "$counts" | tail -1)
  if [ "$dynamic" = false ]; then
    if [ "$n" -gt 3 ]; then
      echo "ok      variable lengths, static shapes: $n executors for one graph (one per length)"
    else
      echo "FAILED  variable lengths, static shapes: only $n executors for one graph"; failed=1
    fi
  elif [ "$n" = 1 ] && [ -n "$last" ] && [ "$after_warmup" = "$last" ]; then
    echo "ok      variable lengths, dynamic shapes: 1 executor per graph, counts after step 5 ($after_warmup) unchanged at step 40"
  else
    echo "FAILED  variable lengths, dynamic shapes: $n executors per graph; counts after step 5 '$after_warmup', at step 40 '$last'"
    failed=1
  fi
done
exit $failed
