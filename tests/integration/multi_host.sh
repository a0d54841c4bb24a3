#!/usr/bin/env bash
# Jobs across hosts (docs/multi-host.md): hosts made of network namespaces (hosts.sh), Open
# MPI's TCP transport between them and shared memory inside each. The built-in gpt (dropout
# 0.1) trains 6 steps, and `ppstage compare-runs` checks each run's per-step losses and
# final parameters within 1e-5 of one process running the same micro-batches:
#   - pp 2, one stage per host;
#   - pp 2 x dp 2 over 2 hosts of 2 ranks, the pipeline across the hosts (--map-by node:
#     each replica's stage 0 on h0, stage 1 on h1) and inside them (by slot);
#   - pp 2 x tp 2, each tensor-parallel pair inside a host.
#   - pp 2 x dp 2 by slot with --pipeline.rank_order pp-dp-tp: each stage's replicas on one
#     host, so the pipeline crosses between them as --map-by node's does.
# A checkpoint written from both hosts of pp 2 x dp 2 into one directory (a shared file
# system's) after 3 steps resumes on two other hosts (h1, h2) at pp 2 x dp 1, and its steps
# match the uninterrupted run. The start-up line names what crosses between the hosts.
# Last, with the hosts' links limited to 200 Mbit/s (tc tbf), `ppstage plan` over the 2
# hosts of 2 ranks probes every link (one pair inside each host, one between them), finds
# the link between hosts the slower, and chooses a layout that keeps the all-reduces inside
# the hosts and cuts the pipeline between them (plan/planner.h, Note [Links in the plan]).
#
# usage: multi_host.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
source "$(dirname "$0")/hosts.sh"
ppstage_under_mpi "$1" "$2"
hosts_need_open_mpi "${mpiexec[0]}"

model=(--model.name gpt --model.layers 2 --model.d_model 32 --model.heads 4 --model.vocab_size 64
       --model.seq_len 16 --model.dropout 0.1 --data.path synthetic)
common=(--train.batch_size 8 --output.log_every 0 --train.grad_clip 0.5 --train.threads 1
        --train.optimizer sgd --train.lr 0.1 --train.momentum 0.9 --comm.timeout_s 60)

"$ppstage" train "${model[@]}" "${common[@]}" --train.steps 6 --pipeline.stages 1 \
  --pipeline.microbatches 4 --output.metrics_json "$work/ref.json" \
  --output.params_dir "$work/ref" > "$work/ref.log"

hosts_up 3
hosts_hostfile "$work/one_each" h0:1 h1:1
hosts_hostfile "$work/two_each" h0:2 h1:2
hosts_hostfile "$work/other_hosts" h1:1 h2:1

run() {  # name, hostfile, mpirun options (up to --), train options...
  local name=$1 hostfile=$2 mpi_options=()
  shift 2
  while [[ $1 != -- ]]; do mpi_options+=("$1"); shift; done
  shift
  rm -rf "${work:?}/run"
  if ! hosts_mpirun "$hostfile" "${mpi_options[@]}" "$ppstage" train "${model[@]}" "${common[@]}" \
       "$@" --output.metrics_json "$work/run.json" --output.params_dir "$work/run" \
       > "$work/run.log" 2>&1; then
    echo "FAILED to run: $name"; tail -5 "$work/run.log"; failed=1; return 1
  fi
}

# Where each rank ran: the metrics' host per rank.
hosts_of() {
  "${PPSTAGE_PYTHON:-python3}" -c 'import json, sys
print(" ".join(r["host"] for r in json.load(open(sys.argv[1]))["ranks"]))' "$1"
}
expect_hosts() {  # name, expected hosts per rank
  local got
  got=$(hosts_of "$work/run.json")
  if [[ $got == "$2" ]]; then
    echo "ok      $1: ranks ran on $got"
  else
    fail "$1: ranks ran on '$got', not '$2'"
  fi
}

# The start-up line that says what crosses between hosts (the shared-memory split).
expect_traffic() {  # name, expected text after "hosts     2: ..."
  if grep -q "^  hosts     2: .*; $2\$" "$work/run.log"; then
    echo "ok      $1: $(grep -m1 '^  hosts ' "$work/run.log" | sed 's/^ *//')"
  else
    fail "$1: no start-up line ending '$2'"
    grep "^  hosts " "$work/run.log" || true
  fi
}

run "pp 2, a stage per host" "$work/one_each" -- --train.steps 6 --pipeline.stages 2 \
  --pipeline.microbatches 4 &&
  compare_runs "pp 2, a stage per host" "$work/ref.json" "$work/run.json" --rtol 1e-5 &&
  expect_hosts "pp 2" "h0 h1"

run "pp 2 x dp 2, pipeline across hosts" "$work/two_each" --map-by node -- --train.steps 6 \
  --pipeline.stages 2 --train.dp 2 --pipeline.microbatches 2 &&
  compare_runs "pp 2 x dp 2, the pipeline across hosts" "$work/ref.json" "$work/run.json" \
    --rtol 1e-5 &&
  expect_hosts "pp 2 x dp 2 by node" "h0 h1 h0 h1" &&
  expect_traffic "pp 2 x dp 2 by node" \
    "across hosts: stage boundaries 0->1; inside them: data-parallel all-reduces"

run "pp 2 x dp 2, pipeline inside hosts" "$work/two_each" -- --train.steps 6 \
  --pipeline.stages 2 --train.dp 2 --pipeline.microbatches 2 &&
  compare_runs "pp 2 x dp 2, each pipeline inside a host" "$work/ref.json" "$work/run.json" \
    --rtol 1e-5 &&
  expect_hosts "pp 2 x dp 2 by slot" "h0 h0 h1 h1" &&
  expect_traffic "pp 2 x dp 2 by slot" \
    "across hosts: data-parallel all-reduces; inside them: the pipeline"

run "pp 2 x tp 2" "$work/two_each" -- --train.steps 6 --pipeline.stages 2 --train.tp 2 \
  --pipeline.microbatches 4 &&
  compare_runs "pp 2 x tp 2, tensor parallelism inside a host" "$work/ref.json" \
    "$work/run.json" --rtol 1e-5 &&
  expect_hosts "pp 2 x tp 2" "h0 h0 h1 h1" &&
  expect_traffic "pp 2 x tp 2" \
    "across hosts: stage boundaries 0->1; inside them: tensor-parallel all-reduces"

run "pp 2 x dp 2, ranks pp-dp-tp" "$work/two_each" -- --train.steps 6 --pipeline.stages 2 \
  --train.dp 2 --pipeline.microbatches 2 --pipeline.rank_order pp-dp-tp &&
  compare_runs "pp 2 x dp 2 in rank order pp-dp-tp, the pipeline across hosts" "$work/ref.json" \
    "$work/run.json" --rtol 1e-5 &&
  expect_hosts "pp 2 x dp 2 pp-dp-tp" "h0 h0 h1 h1" &&
  expect_traffic "pp 2 x dp 2 pp-dp-tp" \
    "across hosts: stage boundaries 0->1; inside them: data-parallel all-reduces"

# Saved from both hosts into one directory, resumed elsewhere at another layout.
run "pp 2 x dp 2, saving" "$work/two_each" --map-by node -- --train.steps 3 \
  --pipeline.stages 2 --train.dp 2 --pipeline.microbatches 2 --checkpoint.dir "$work/ck" \
  --checkpoint.every 3 &&
  run "resumed at pp 2 on h1 and h2" "$work/other_hosts" -- --train.steps 6 \
    --pipeline.stages 2 --pipeline.microbatches 4 --checkpoint.dir "$work/ck" \
    --checkpoint.resume true --checkpoint.every 0 &&
  compare_runs "saved on h0 and h1 at pp 2 x dp 2, resumed on h1 and h2 at pp 2" \
    "$work/ref.json" "$work/run.json" --rtol 1e-5 &&
  expect_hosts "resumed" "h1 h2"

# The planner over a slow link between hosts (the last case: the links stay slow).
hosts_link_rate 200mbit
if hosts_mpirun "$work/two_each" "$ppstage" plan "${model[@]}" --train.batch_size 8 \
     --train.threads 1 --train.optimizer sgd --train.momentum 0.9 --plan.schedules 1f1b \
     --json > "$work/plan.json" 2> "$work/plan.err"; then
  if result=$("${PPSTAGE_PYTHON:-python3}" "$(dirname "$0")/plan_across_hosts.py" \
                "$work/plan.json" 27.5e6); then
    echo "ok      plan over a 200 Mbit/s link between hosts: $result"
  else
    fail "plan over a 200 Mbit/s link between hosts: $result"
  fi
else
  fail "plan across hosts did not run"
  tail -5 "$work/plan.err"
fi

exit "$failed"
