#!/usr/bin/env bash
# Live metrics at pp 2: --output.metrics_jsonl has one line per step and per evaluation,
# whose losses are the metrics JSON's, and a resumed run appends the steps after its
# checkpoint; --output.tensorboard's event file is read by TensorBoard's own reader
# (EventAccumulator, when Python's tensorboard package is there; else by protobuf, in
# the unit test TensorBoardEvents) with the same losses.
#
# usage: live_metrics.sh PPSTAGE "MPIEXEC ARGS" FIXTURES_DIR
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
python=${PPSTAGE_PYTHON:-python3}
tokens=$3/data/tokens_u16.bin

run=(--config configs/gpt-tiny.ini --train.threads 1 --output.log_every 0 --eval.every 2
     --data.path "$tokens" --data.val_path "$tokens" --checkpoint.dir "$work/ckpt" --output.tensorboard "$work/tb"
     --output.metrics_jsonl "$work/live.jsonl")
cd "$(dirname "$0")/../.."
"${mpiexec[@]}" -np 2 "$ppstage" train "${run[@]}" --train.steps 4 \
  --output.metrics_json "$work/whole.json" > "$work/whole.log" 2>&1 || { cat "$work/whole.log"; exit 1; }
cp "$work/live.jsonl" "$work/whole.jsonl"
rm -rf "$work/ckpt" "$work/tb" "$work/live.jsonl"
"${mpiexec[@]}" -np 2 "$ppstage" train "${run[@]}" --train.steps 2 > "$work/a.log" 2>&1 ||
  { cat "$work/a.log"; exit 1; }
"${mpiexec[@]}" -np 2 "$ppstage" train "${run[@]}" --train.steps 4 --checkpoint.resume true \
  > "$work/b.log" 2>&1 || { cat "$work/b.log"; exit 1; }

"$python" - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
whole = json.load(open(f"{work}/whole.json"))
def lines(name):
    return [json.loads(l) for l in open(f"{work}/{name}")]
live = lines("whole.jsonl")
steps = [l for l in live if l["kind"] == "step"]
evals = [l for l in live if l["kind"] == "eval"]
assert [l["step"] for l in steps] == [1, 2, 3, 4], steps
assert [l["loss"] for l in steps] == whole["losses"], (steps, whole["losses"])
assert [e["step"] for e in evals] == [2, 4], evals
assert all(l["tokens_per_s"] > 0 and l["finite"] for l in steps)
resumed = lines("live.jsonl")
assert [l["step"] for l in resumed if l["kind"] == "step"] == [1, 2, 3, 4], resumed
assert [l["loss"] for l in resumed if l["kind"] == "step"] == whole["losses"]
print("ok      JSON lines: 4 steps and 2 evaluations, the metrics JSON's losses; a resumed run appends")
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("skipped TensorBoard's reader: no tensorboard package (tests/unit TensorBoardEvents decodes the files)")
    sys.exit(0)
files = sorted(glob.glob(f"{work}/tb/events.out.tfevents.*"))
assert len(files) == 2, files  # one per run
losses = {}
for f in files:
    acc = EventAccumulator(f)
    acc.Reload()
    for e in acc.Scalars("train/loss"):
        losses[e.step] = e.value
    assert "eval/loss" in acc.Tags()["scalars"], acc.Tags()
assert sorted(losses) == [1, 2, 3, 4], losses
for step, loss in zip(range(1, 5), whole["losses"]):
    assert abs(losses[step] - loss) <= 1e-6 * abs(loss), (step, losses[step], loss)
print("ok      TensorBoard's EventAccumulator reads train/loss (as float32) and eval/loss of both runs")
PY
