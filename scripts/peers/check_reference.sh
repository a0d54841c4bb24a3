#!/usr/bin/env bash
# Checks ppstage's 1F1B against the hand-written PyTorch peer (scripts/peers/gpt_1f1b_gloo.py)
# on one saved model: the peer builds gpt-small (scripts/peers/gpt.py, seed 0), saves it as
# TorchScript and trains it for a few steps on 2 gloo processes; ppstage trains the same file
# on 2 MPI ranks with the same data (--data.path synthetic), batch, micro-batches, optimizer
# and clipping. Fails (exit 1) unless
#   - the peer's parameter count equals ppstage's for the file (ppstage split --json) and
#     the built-in gpt's with configs/gpt-small.ini, and
#   - every step's loss agrees within 1e-4 relative.
# Prints both runs' losses and median step times (steps after the first).
#
#   PPSTAGE=build/src/ppstage STEPS=5 scripts/peers/check_reference.sh
#
# Environment: PPSTAGE (default build/src/ppstage), STEPS (default 5), OUT (a directory to
# keep the model, logs and JSON files in; default a temporary one, removed at the end).
set -euo pipefail

cd "$(dirname "$0")/../.."
PPSTAGE=${PPSTAGE:-build/src/ppstage}
STEPS=${STEPS:-5}
PYTHON=scripts/python  # the environment of scripts/install-deps.sh: the LibTorch ppstage links
TOLERANCE=1e-4

[[ -x "$PPSTAGE" ]] || { echo "check_reference: no ppstage binary at '$PPSTAGE' (set PPSTAGE)" >&2; exit 2; }
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
else
  OUT=$(mktemp -d /tmp/ppstage_peer.XXXXXX)
  trap 'rm -rf "$OUT"' EXIT
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MODEL="$OUT/gpt_small.pt"

# The run both sides share (configs/gpt-small.ini's model and training, synthetic data).
SHARED=(--model.seq_len 128 --model.vocab_size 256 --train.batch_size 16 --train.seed 0)
TRAIN=(--data.path synthetic --pipeline.stages 2 --pipeline.split_points layers.4
       --pipeline.microbatches 8 --pipeline.schedule 1f1b --compile.mode none
       --train.steps "$STEPS" --train.threads 1 --train.optimizer adamw --train.lr 0.001
       --train.weight_decay 0.01 --train.grad_clip 1.0 --train.loss cross_entropy)

echo "== peer: hand-written 1F1B on gloo ($STEPS steps)"
"$PYTHON" scripts/peers/gpt_1f1b_gloo.py --save "$MODEL" --seed 0 --steps "$STEPS" \
  --batch-size 16 --microbatches 8 --lr 0.001 --weight-decay 0.01 --grad-clip 1.0 \
  --data-seed 0 --threads 1 --log --json "$OUT/peer.json"

echo "== ppstage 1f1b on the same file ($STEPS steps)"
mpirun --allow-run-as-root --oversubscribe -np 2 "$PPSTAGE" train --model.name "$MODEL" \
  "${SHARED[@]}" "${TRAIN[@]}" --output.log_every 1 --output.metrics_json "$OUT/ppstage.json" \
  > "$OUT/ppstage.log" 2>&1 || { cat "$OUT/ppstage.log" >&2; exit 1; }
grep -E '^step ' "$OUT/ppstage.log"

echo "== parameter counts (ppstage split --json)"
"$PPSTAGE" split --model.name "$MODEL" "${SHARED[@]}" --pipeline.stages 2 \
  --pipeline.split_points layers.4 --json > "$OUT/split_file.json"
"$PPSTAGE" split --config configs/gpt-small.ini --pipeline.stages 2 --json > "$OUT/split_gpt.json"

"$PYTHON" - "$OUT" "$TOLERANCE" <<'EOF'
import json
import statistics
import sys

out, tolerance = sys.argv[1], float(sys.argv[2])
load = lambda name: json.load(open(f"{out}/{name}"))
peer, ppstage = load("peer.json"), load("ppstage.json")
file_split, gpt_split = load("split_file.json"), load("split_gpt.json")
failures = []

counts = {"peer": peer["parameters"], "ppstage, same file": file_split["num_params"],
          "ppstage built-in gpt (gpt-small.ini)": gpt_split["num_params"]}
for name, count in counts.items():
    print(f"  parameters  {name:38s} {count}")
if len(set(counts.values())) != 1:
    failures.append(f"parameter counts differ: {counts}")
if [s["num_params"] for s in file_split["stages"]] != peer["stage_parameters"]:
    failures.append(f"stage parameter counts differ: ppstage "
                    f"{[s['num_params'] for s in file_split['stages']]}, peer "
                    f"{peer['stage_parameters']}")

a, b = peer["losses"], ppstage["losses"]
if len(a) != len(b):
    failures.append(f"{len(a)} peer steps, {len(b)} ppstage steps")
print(f"  {'step':>4}  {'peer loss':>18}  {'ppstage loss':>18}  {'rel. diff':>9}")
identical = 0
for step, (x, y) in enumerate(zip(a, b), 1):
    x, y = (float("nan") if v is None else v for v in (x, y))  # null: a non-finite loss
    rel = abs(x - y) / max(abs(y), 1e-30)
    ok = rel <= tolerance  # False for NaN
    identical += x == y
    print(f"  {step:4d}  {x:18.12f}  {y:18.12f}  {rel:9.2e}{'' if ok else '  MISMATCH'}")
    if not ok:
        failures.append(f"step {step}: loss {x} (peer) vs {y} (ppstage), {rel:.2e} relative")
print(f"  {identical} of {len(b)} losses bit-identical")

steady = lambda times: statistics.median(times[1:] if len(times) > 1 else times)
print(f"  median step (after the first)  peer {peer['measured_step_s']:.3f} s, "
      f"ppstage {steady(ppstage['step_time_s']):.3f} s "
      f"(ppstage's measured_step_s, all steps: {ppstage['measured_step_s']:.3f} s)")

if failures:
    print("check_reference: FAILED\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"check_reference: OK (losses within {tolerance:g} relative, parameter counts equal)")
EOF
