#!/usr/bin/env bash
# What a run can check before it spends its steps, and what must end it (docs/cli.md):
#   - each unwritable output path (metrics JSON, parameter dir, checkpoint dir, trace) is
#     refused on every rank with exit 2 before step 1, even in a run of 100,000 steps;
#   - a diverging run (huge lr, no clipping) exits 3 at its first non-finite step, naming
#     the step, where it appeared and the last finite loss, and still writes its metrics
#     and trace; with --train.nonfinite skip it runs to the end and counts the skipped
#     steps in the metrics; --train.max_skipped ends it with exit 3;
#   - a finite loss with a non-finite gradient exits 3 naming the first such parameter.
#
# usage: run_guards.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
cd "$work"

run() {  # expected exit code, name, train options...
  local expected=$1 name=$2 code=0
  shift 2
  # timeout: a hang guard only (a refusal takes seconds), not a measurement.
  timeout 300 "${mpiexec[@]}" -np 2 "$ppstage" train --train.threads 1 --comm.timeout_s 60 "$@" \
    > "$name.log" 2>&1 || code=$?
  [ "$code" = "$expected" ] || { fail "$name: exit $code, not $expected"; tail -3 "$name.log"; }
}

touch a-file
run 2 metrics --train.steps 100000 --output.metrics_json a-file/metrics.json
run 2 params --train.steps 100000 --output.params_dir a-file/params
run 2 checkpoint --train.steps 100000 --checkpoint.dir a-file/ck
run 2 metrics-dir --train.steps 100000 --output.metrics_json .
run 2 trace --train.steps 100000 --output.trace a-file/trace.json
for name in metrics params checkpoint metrics-dir trace; do
  line=$(grep -m1 "ppstage: error: cannot write --" "$name.log") || fail "$name: no refusal line"
  grep -q "^step" "$name.log" && fail "$name: a step ran"
  echo "ok: $name: $line"
done

diverge=(--train.steps 12 --train.optimizer sgd --train.lr 10000 --train.grad_clip 0
         --output.log_every 0)
run 3 diverge "${diverge[@]}" --output.metrics_json diverge.json --output.trace diverge-trace.json
line=$(grep -m1 "ppstage: error: step [0-9]*: the loss of micro-batch [0-9]* (stage 1) is nan; last finite loss .* (step [0-9]*); stopped before the optimizer applied it" diverge.log) ||
  { fail "diverge: no line naming the step"; cat diverge.log; }
echo "ok: diverge: $line"
[ -f diverge.json ] || fail "diverge: the metrics JSON was not written"
grep -q '"traceEvents"' diverge-trace.json || fail "diverge: the trace was not written"

run 0 skip "${diverge[@]}" --train.nonfinite skip --train.max_skipped 100 --output.metrics_json skip.json
skipped=$("${PPSTAGE_PYTHON:-python3}" -c 'import json; print(json.load(open("skip.json"))["skipped_steps"])' 2> /dev/null ||
          grep -o '"skipped_steps": [0-9]*' skip.json | grep -o '[0-9]*$')
[ "$skipped" -gt 0 ] || fail "skip: skipped_steps is $skipped"
echo "ok: skip: the run finished, skipped_steps $skipped"

run 3 max-skipped "${diverge[@]}" --train.nonfinite skip --train.max_skipped 3
grep -q "3 steps in a row skipped (--train.max_skipped)" max-skipped.log ||
  { fail "max-skipped: no line"; tail -3 max-skipped.log; }
echo "ok: max-skipped: $(grep -m1 'ppstage: error' max-skipped.log)"

# A finite loss whose gradient is not: sqrt at 0 (a model made here, with PPSTAGE_PYTHON's torch;
# torch.jit.script reads the class's source, so it goes to a file first).
cat > sqrt_at_zero.py <<'PY'
import torch


class SqrtAtZero(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        return self.b(h + (h - h.detach()).abs().sqrt())  # the value h, the gradient nan


torch.jit.save(torch.jit.script(SqrtAtZero()), "sqrt_at_zero.pt")
PY
if "${PPSTAGE_PYTHON:-python3}" sqrt_at_zero.py 2> /dev/null; then
  run 3 gradient --model.name sqrt_at_zero.pt --model.input_dtype float32 --model.input_shape 8,8 \
    --data.path synthetic --train.steps 3
  line=$(grep -m1 "ppstage: error: step 1: the gradient of a.weight (stage 0) is not finite; the gradient norm is nan; the step's loss is " gradient.log) ||
    { fail "gradient: no line naming the parameter"; cat gradient.log; }
  echo "ok: gradient: $line"
else
  echo "skip: no torch in ${PPSTAGE_PYTHON:-python3}; the non-finite gradient case is not checked"
fi

exit "$failed"
