#!/usr/bin/env bash
# A model we did not write (tests/fixtures/real, see scripts/make_fixtures.py) trains
# pipelined as in one process: 2 steps of SGD on 2 ranks (2 stages, 1F1B) in compile modes
# none, stage and block, and one process in stage and block, each checked by
# `ppstage compare-runs` against one process in compile mode none with the same 2
# micro-batches (the same micro-batches give random ops the same draws, see Note [Keyed
# random ops]). Losses within 1e-5; parameters within 1e-5 of their largest value, or 1e-6
# absolute (a BatchNorm bias whose gradient is mathematically zero holds float noise).
# Then at pp 2 x tp 2 (4 ranks): the regions the tensor-parallel pass proves are sharded,
# the rest replicated, and the run still matches one process (REAL_MODEL_TP_SHARDED=1: some
# region must be sharded; =any: either way; otherwise none may be). REAL_MODEL_ONLY_TP=1
# runs only that.
#
# usage: real_model_numerics.sh PPSTAGE "MPIEXEC ARGS" [model options...]
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
shift 2
model=("$@")

common=(--train.steps 2 --train.batch_size 8 --pipeline.microbatches 2 --output.log_every 0
        --data.path synthetic --train.optimizer sgd --train.lr 0.1 --train.threads 1
        --comm.timeout_s 60)
"$ppstage" train "${model[@]}" "${common[@]}" --pipeline.stages 1 \
  --output.metrics_json "$work/ref.json" --output.params_dir "$work/ref" > "$work/ref.log"

run() {  # name, processes, extra train options...
  local name=$1 processes=$2
  shift 2
  rm -rf "$work/run"
  if ! "${mpiexec[@]}" -np "$processes" "$ppstage" train "${model[@]}" "${common[@]}" "$@" \
       --output.metrics_json "$work/run.json" --output.params_dir "$work/run" \
       > "$work/run.log" 2>&1; then
    echo "FAILED to run: $name"; tail -5 "$work/run.log"; failed=1; return
  fi
  compare_runs "$name" "$work/ref.json" "$work/run.json" --rtol 1e-5 --atol 1e-6 || true
}

if [ "${REAL_MODEL_ONLY_TP:-0}" != 1 ]; then
  for mode in none stage block; do
    run "1f1b pp=2 compile=$mode" 2 --pipeline.stages 2 --pipeline.schedule 1f1b \
      --compile.mode "$mode"
  done
  for mode in stage block; do
    run "one process compile=$mode" 1 --pipeline.stages 1 --compile.mode "$mode"
  done
fi

# Tensor parallelism: pp 2 x tp 2. The regions the pass proves are sharded (attention and
# MLPs: REAL_MODEL_TP_SHARDED=1 expects some), the rest replicated; either way the run
# matches one process, and its start-up lines say which regions are which.
run "1f1b pp=2 x tp=2 compile=stage" 4 --pipeline.stages 2 --train.tp 2 --compile.mode stage
regions=$(sed -n '/^  tp  /,/^$/p' "$work/run.log")
echo "$regions" | sed 's/^ */        /'
if [ "${REAL_MODEL_TP_SHARDED:-0}" = 1 ]; then
  echo "$regions" | grep -q " sharded (column" || { echo "FAILED: no region sharded"; failed=1; }
elif [ "${REAL_MODEL_TP_SHARDED:-0}" != any ] && echo "$regions" | grep -q " sharded (column"; then
  echo "FAILED: a region sharded where none was expected"; failed=1
fi
exit $failed
