#!/usr/bin/env bash
# Faults between hosts (docs/multi-host.md), on hosts made of network namespaces
# (hosts.sh): the built-in gpt at pp 2, one stage per host, --comm.timeout_s 5.
#   - The link between the hosts goes down mid-step (`ip link set ... down`): every rank
#     exits within the timeout and some slack (slack_s below), the job ends non-zero,
#     nothing is left running on either host,
#     and ppstage's error names the rank it lost and its host ("rank 1 (host h1)").
#   - Every process of one host is killed: the same, except that mpirun sees its daemon
#     die and ends the job first, so the words are Open MPI's. They vary with the timing:
#     "... on node h1", "Peer host: h1", or (seen once in CI) only "ORTE was unable to
#     reliably start one or more daemons", naming no host; so they are printed, not checked.
#   - After a host died, the job resumes on the remaining host at another layout (pp 1 x
#     dp 2 on h0) from the newest complete checkpoint for 4 more steps, and ends bitwise as
#     a run that saved there without a failure and resumed the same way.
#   - Loss and latency spikes on h1's link (1% of frames dropped, 25 ms of delay with 25 ms
#     of jitter each way, through link_emulator.c: this kernel may have no netem): the job
#     completes with the losses and parameters of the run without them, bitwise, slower.
#
# usage: host_faults.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
source "$(dirname "$0")/hosts.sh"
ppstage_under_mpi "$1" "$2"
hosts_need_open_mpi "${mpiexec[0]}"

timeout_s=5
# A liveness bound, not a timing: a rank's wait may begin after the fault (the step in
# flight), a failed rank gives its report 1.5 s to leave (Note [Failure reports]), and a
# loaded machine (CI's) is slower; measured here, the ranks were gone 8.1 s after the fault.
slack_s=10
model=(--model.name gpt --model.layers 2 --model.d_model 32 --model.heads 4 --model.vocab_size 64
       --model.seq_len 16 --model.dropout 0.1 --data.path synthetic)
common=(--train.batch_size 8 --train.threads 1 --train.optimizer sgd --train.lr 0.1
        --train.momentum 0.9 --comm.timeout_s "$timeout_s")

hosts_up 2
hosts_hostfile "$work/one_each" h0:1 h1:1
hosts_hostfile "$work/h0_only" h0:2

# Starts a job of 2 stages on h0 and h1 in the background ($job), its log in $work/NAME.log.
start_job() {  # name, train options...
  local name=$1
  shift
  hosts_mpirun "$work/one_each" "$ppstage" train "${model[@]}" "${common[@]}" \
    --pipeline.stages 2 --pipeline.microbatches 4 --output.log_every 1 "$@" \
    > "$work/$name.log" 2>&1 &
  job=$!
}

# Waits until `test` (a command) succeeds, at most `limit` seconds; false on time-out.
wait_until() {  # limit, command...
  local limit=$1 i
  shift
  for ((i = 0; i < limit * 10; ++i)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
logged_step() { grep -q "^step *$2/" "$work/$1.log"; }
ranks_on() {  # host: its ppstage processes
  local pid
  for pid in $(hosts_pids "$1"); do
    [[ $(cat "/proc/$pid/comm" 2> /dev/null) == ppstage ]] && echo "$pid"
  done
  return 0
}
no_ranks_left() { [[ -z $(ranks_on h0)$(ranks_on h1) ]]; }
nothing_left_on() { [[ -z $(hosts_pids "$1") ]]; }

# After a fault at $fault_at: every rank gone within the timeout, mpirun ended non-zero,
# nothing left on either host, and the log naming `expected`.
check_job_ended() {  # name, expected text in the log (empty: mpirun's, printed)
  local name=$1 expected=$2 rc=0 ranks_ms
  if wait_until $((timeout_s + slack_s)) no_ranks_left; then
    ranks_ms=$((($(date +%s%N) - fault_at) / 1000000))
    echo "ok      $name: every rank exited $((ranks_ms / 1000)).$((ranks_ms % 1000 / 100)) s after the fault" \
      "(--comm.timeout_s $timeout_s)"
  else
    fail "$name: ranks still running $((timeout_s + slack_s)) s after the fault:" \
      "h0 $(ranks_on h0 | wc -l), h1 $(ranks_on h1 | wc -l)"
  fi
  if ! wait_until 60 eval '! kill -0 $job 2> /dev/null'; then
    fail "$name: mpirun still running 60 s after the fault"
    kill -9 "$job" 2> /dev/null || true
  fi
  wait "$job" || rc=$?
  [[ $rc -ne 0 ]] || fail "$name: the job ended with status 0"
  wait_until 20 nothing_left_on h0 || fail "$name: left running on h0: $(hosts_pids h0)"
  wait_until 20 nothing_left_on h1 || fail "$name: left running on h1: $(hosts_pids h1)"
  if [[ -z $expected ]]; then  # mpirun ended the job: its message is Open MPI's
    echo "ok      $name: exit status $rc; Open MPI's words:" \
      "$(grep -m1 "on node\|Peer host\|ORTE\|MPI communication peer" "$work/$name.log" | sed 's/^ *//')"
  elif grep -v "^  hosts " "$work/$name.log" | grep -q "$expected"; then  # not the start-up line
    echo "ok      $name: exit status $rc; the log names '$expected':"
    grep -v "^  hosts " "$work/$name.log" | grep -m1 "$expected" | cut -c1-300
  else
    fail "$name: the log does not name '$expected'"
    grep -v "^step \|^  \|^$" "$work/$name.log" | tail -25
  fi
}

# 1. The link between the hosts goes down mid-step.
start_job link_down --train.steps 100000
wait_until 60 logged_step link_down 3 || fail "link down: no third step within 60 s"
fault_at=$(date +%s%N)
hosts_link h1 down
check_job_ended link_down "rank 1 (host h1)"
hosts_link h1 up

# 2. Every process of one host dies.
start_job host_killed --train.steps 100000
wait_until 60 logged_step host_killed 3 || fail "host killed: no third step within 60 s"
fault_at=$(date +%s%N)
hosts_kill h1
check_job_ended host_killed "rank 1 (host h1)"

# 3. Saving every 4 steps, h1 dies after the first checkpoint; the job resumes on h0 alone at
# pp 1 x dp 2 (the same micro-batches) from the newest complete checkpoint.
start_job saving --train.steps 100000 --checkpoint.dir "$work/ck" --checkpoint.every 4
# A complete checkpoint, whichever: at 9 ms a step, the one of step 4 may already have
# made way for newer ones (--checkpoint.keep) between two looks.
saved_one() { compgen -G "$work/ck/step-*/manifest.json" > /dev/null; }
wait_until 60 saved_one || fail "saving: no complete checkpoint within 60 s"
fault_at=$(date +%s%N)
hosts_kill h1
check_job_ended saving ""
resume() {  # name, checkpoint directory, steps
  hosts_mpirun "$work/h0_only" "$ppstage" train "${model[@]}" "${common[@]}" --train.steps "$3" \
    --pipeline.stages 1 --train.dp 2 --pipeline.microbatches 2 --output.log_every 0 \
    --checkpoint.dir "$2" --checkpoint.resume true --checkpoint.every 0 \
    --output.metrics_json "$work/$1.json" --output.params_dir "$work/$1" > "$work/$1.log" 2>&1
}
saved=0  # the newest step whose checkpoint is complete (its manifest written last)
for manifest in "$work"/ck/step-*/manifest.json; do
  step=$(basename "$(dirname "$manifest")")
  step=$((10#${step#step-}))
  ((step > saved)) && saved=$step
done
if resume resumed "$work/ck" $((saved + 4)); then
  first=$("${PPSTAGE_PYTHON:-python3}" -c 'import json, sys
print(json.load(open(sys.argv[1]))["first_step"])' "$work/resumed.json")
  [[ $first == "$saved" ]] || fail "resumed after step $first, not the newest complete $saved"
  echo "ok      resumed on h0 at pp 1 x dp 2 after step $first, the newest complete checkpoint"
  # The same without a failure: the first $saved steps on both hosts, saved, resumed alike.
  hosts_mpirun "$work/one_each" "$ppstage" train "${model[@]}" "${common[@]}" \
    --pipeline.stages 2 --pipeline.microbatches 4 --output.log_every 0 \
    --train.steps "$saved" --checkpoint.dir "$work/ck-ref" --checkpoint.every "$saved" \
    > "$work/ref-saving.log" 2>&1 || fail "the reference's first $saved steps failed"
  resume reference "$work/ck-ref" $((saved + 4)) || fail "the reference's resume failed"
  compare_runs "resumed after h1 died, against the same resume without a failure (bitwise)" \
    "$work/reference.json" "$work/resumed.json" --rtol 0 --atol 0 || true
else
  fail "the resume on h0 failed"
  tail -5 "$work/resumed.log"
fi

# 4. Loss and latency spikes between the hosts: the same run, slower.
shaped() {  # name
  hosts_mpirun "$work/one_each" "$ppstage" train "${model[@]}" "${common[@]}" \
    --pipeline.stages 2 --pipeline.microbatches 4 --train.steps 6 --output.log_every 0 \
    --comm.timeout_s 120 --output.metrics_json "$work/$1.json" --output.params_dir "$work/$1" \
    > "$work/$1.log" 2>&1 || { fail "$1: the run failed"; tail -5 "$work/$1.log"; }
}
shaped clear_link
hosts_link_emulate h1 25 25 0.01
shaped lossy_link
compare_runs "1% loss and 25 +- 25 ms of delay between the hosts, against none (bitwise)" \
  "$work/clear_link.json" "$work/lossy_link.json" --rtol 0 --atol 0 || true
"${PPSTAGE_PYTHON:-python3}" -c 'import json, sys
clear, lossy = (json.load(open(p))["measured_step_s"] for p in sys.argv[1:3])
print(f"ok      median step {clear:.4f} s without the loss and delay, {lossy:.4f} s with them")' \
  "$work/clear_link.json" "$work/lossy_link.json"

exit "$failed"
