#!/usr/bin/env bash
# Runs that lose nothing to a crash or a preemption (docs/cli.md, "Checkpoints"), against
# the uninterrupted run of the same steps:
#   - a rank SIGKILLed while checkpointing every step: after its files but before the
#     manifest of a save (rank 1, then rank 0; PPSTAGE_CHECKPOINT_FAULT), and at two
#     moments of a running job. The directory then holds a complete checkpoint, and the
#     resumed run ends with the same losses and parameters;
#   - SIGTERM to mpirun, and to one rank: every rank stops at the same step with
#     "stopped by SIGTERM after step N; checkpoint D/step-..." (or, the step in flight
#     abandoned, "during step N+1, abandoned before its optimizer step; checkpoint
#     D/step-N"; the rank that got no signal learns of it from a stop notice), the
#     checkpoint is complete, and the resumed run finishes like the uninterrupted one;
#   - Ctrl-C (SIGINT to the process group): one process says SIGINT; under mpirun, which
#     passes it on to the ranks as SIGTERM, the stop line says that.
#
# usage: checkpoint_preemption.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
cd "$work"

common=(--train.batch_size 8 --pipeline.microbatches 4 --train.threads 1 --comm.timeout_s 60)
train() { "${mpiexec[@]}" -np 2 "$ppstage" train "${common[@]}" "$@"; }

# Runs `steps` steps straight, resumes `dir` to the same step and compares the two.
resume_and_compare() {  # name, dir, steps
  local name=$1 dir=$2 steps=$3
  train --train.steps "$steps" --output.log_every 0 --output.metrics_json "straight-$name.json" \
    --output.params_dir "straight-$name" > /dev/null
  if ! ls "$dir"/step-*/manifest.json > /dev/null 2>&1; then
    fail "$name: no complete checkpoint in $dir"
    return
  fi
  train --train.steps "$steps" --output.log_every 0 --checkpoint.dir "$dir" \
    --checkpoint.resume true --output.metrics_json "$name.json" --output.params_dir "$name" \
    > "$name.log" 2>&1 ||
    { fail "$name: the resumed run failed"; cat "$name.log"; return; }
  if "$ppstage" compare-runs --reference "straight-$name.json" --candidate "$name.json" --rtol 0 \
    > "$name.cmp"; then
    echo "ok: $name: $(grep -m1 '^resuming\|^no complete' "$name.log"); $(grep -m1 losses "$name.cmp")"
  else
    fail "$name: resumed run differs"; cat "$name.cmp"
  fi
}

# --- SIGKILL in the middle of a save (after this rank's files, before the manifest) --------
for rank in 1 0; do
  dir=ck-kill-save-$rank
  PPSTAGE_CHECKPOINT_FAULT=kill:3:$rank train --train.steps 10 --output.log_every 0 \
    --checkpoint.dir "$dir" --checkpoint.every 1 > "$dir.log" 2>&1 &&
    fail "$dir: the run was not killed"
  [ -f "$dir/step-00000003/manifest.json" ] && fail "$dir: step 3 has a manifest"
  resume_and_compare "kill-save-rank$rank" "$dir" 10
done

# --- SIGKILL to a rank of a running job -----------------------------------------------------
for delay in 0.3 1.1; do
  dir=ck-kill-$delay
  train --train.steps 100000 --output.log_every 0 --checkpoint.dir "$dir" --checkpoint.every 1 \
    > "$dir.log" 2>&1 &
  job=$!
  while ! ls "$dir"/step-*/manifest.json > /dev/null 2>&1; do sleep 0.05; done
  sleep "$delay"
  pkill -KILL -f -- "--checkpoint.dir $dir" || true
  wait "$job" && fail "$dir: the run was not killed"
  last=$(ls -d "$dir"/step-* | tail -1)
  resume_and_compare "kill-after-${delay}s" "$dir" $((10#${last##*step-} + 10))
done

# --- SIGTERM ---------------------------------------------------------------------------------
# mpirun passes SIGTERM on to the ranks after odls_base_sigkill_timeout seconds and kills
# them that long after (see docs/cli.md); the ranks need the second interval for the step
# and the save.
# The stop line names the checkpoint; then 10 steps more, resumed, against straight.
# A stop line: after the step the signal rode (`after step N; checkpoint D/step-N`), or,
# where the signal came mid-step, during it (`during step N+1, abandoned before its
# optimizer step; checkpoint D/step-N`: Note [Abandoning a step]).
stop_line() {  # signal, dir, log
  grep -m1 -E "^stopped by $1 (after step [0-9]+|during step [0-9]+, abandoned before its optimizer step); checkpoint $2/step-" "$3"
}
stopped() {  # name, dir, log
  local name=$1 dir=$2 log=$3 line
  line=$(stop_line SIGTERM "$dir" "$log") || { fail "$name: no stop line"; tail -5 "$log"; return; }
  echo "ok: $name: $line"
  local step=${line##*checkpoint $dir/step-}
  step=$((10#${step%% *}))
  resume_and_compare "$name-resumed" "$dir" $((step + 10))
}
dir=ck-term-mpirun
"${mpiexec[@]}" --mca odls_base_sigkill_timeout 3 -np 2 "$ppstage" train "${common[@]}" \
  --train.steps 100000 --output.log_every 10 --checkpoint.dir "$dir" > term-mpirun.log 2>&1 &
job=$!
while ! grep -q "^step   20/" term-mpirun.log; do sleep 0.05; done
kill -TERM "$job"
wait "$job" || true  # mpirun itself reports the signal; the ranks exit 0
stopped term-mpirun "$dir" term-mpirun.log

dir=ck-term-rank
train --train.steps 100000 --output.log_every 1 --checkpoint.dir "$dir" > term-rank.log 2>&1 &
job=$!
while ! grep -q "^step   20/" term-rank.log; do sleep 0.05; done
pkill -TERM -n -f -- "--checkpoint.dir $dir"  # the newest: a rank, not mpirun
if wait "$job"; then
  stopped term-rank "$dir" term-rank.log
else
  fail "term-rank: exit code $? (every rank should exit 0)"; tail -5 term-rank.log
fi

# --- Ctrl-C ------------------------------------------------------------------------------
# SIGINT to the whole process group, as a terminal sends it. One process: the stop line
# says SIGINT. Under mpirun, whose ranks sit in process groups of their own, only mpirun
# gets it and passes it on as SIGTERM: the stop line says so. (Every 10th step logged: once
# mpirun stops, it stops reading the ranks' output, which must not fill up meanwhile.)
ctrl_c() {  # name, expected signal, launcher...
  local name=$1 expected=$2 line
  shift 2
  setsid "$@" "$ppstage" train "${common[@]}" --train.steps 100000 --output.log_every 10 \
    --checkpoint.dir "ck-$name" > "$name.log" 2>&1 &
  local job=$!
  while ! grep -q "^step   20/" "$name.log"; do sleep 0.05; done
  kill -INT -- "-$job"
  wait "$job" || true
  if line=$(stop_line "$expected" "ck-$name" "$name.log"); then
    echo "ok: $name: $line"
  else
    fail "$name: no $expected stop line"; tail -3 "$name.log"
  fi
}
ctrl_c int-one-process SIGINT
ctrl_c int-mpirun SIGTERM "${mpiexec[@]}" --mca odls_base_sigkill_timeout 3 -np 2
grep -q "(under mpirun, a Ctrl-C reaches the ranks as SIGTERM)" int-mpirun.log ||
  fail "int-mpirun: the stop line does not say that a Ctrl-C arrives as SIGTERM"

exit "$failed"
