#!/usr/bin/env bash
# Prints the table of docs/models.md: for each model in tests/fixtures/real, its parameters,
# splittable units, the modules of each of 2 stages, and the largest relative loss
# difference against one process (same micro-batches) at pp 2 in compile modes none, stage
# and block, from tests/integration/real_model_numerics.sh.
#
# usage: bash scripts/real_models_table.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ppstage=${1:-$root/build}/src/ppstage
mpiexec="mpirun --allow-run-as-root --oversubscribe"
real=$root/tests/fixtures/real
for file in "$real"/*.pt; do
  name=$(basename "$file")
  read -r covers params dtype shape < <(python3 - "$real/fixtures.json" "$name" <<'PY'
import json, sys
entry = json.load(open(sys.argv[1]))[sys.argv[2]]
shape = ",".join(str(d) for d in [8] + entry["shape"][1:])
print(entry["covers"].replace(" ", "_"), entry["params"], entry["dtype"], shape)
PY
)
  if [ "$dtype" = int64 ]; then
    input=(--model.vocab_size 64 --model.seq_len 16)
  else
    input=(--model.input_dtype float32 --model.input_shape "$shape")
  fi
  read -r units stages < <("$ppstage" split --model.name "$file" "${input[@]}" \
      --train.batch_size 8 --pipeline.stages 2 --json | python3 -c '
import json, sys
plan = json.load(sys.stdin)
print(len(plan["units"]), " / ".join(", ".join(s["modules"]) for s in plan["stages"]).replace(" ", "~"))')
  diffs=$(REAL_MODEL_TP_SHARDED=any \
      bash "$root/tests/integration/real_model_numerics.sh" "$ppstage" "$mpiexec" \
      --model.name "$file" "${input[@]}" |
    sed -n 's/^ok *1f1b pp=2 compile=\([a-z]*\): [0-9]* steps, max rel diff \([^ ]*\).*/\2/p' |
    sed 's/^0.00e+00$/0/' | paste -sd/ | sed 's#/# / #g')
  echo "| ${name%.pt} | ${covers//_/ } | $params | $units | ${stages//\~/ } | $diffs |"
done
