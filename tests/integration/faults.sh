#!/usr/bin/env bash
# Faults injected under mpirun -np 2, each with its outcome asserted:
#   - rank 1 SIGKILLed mid-step: the job ends non-zero within --comm.timeout_s, naming rank 1;
#   - rank 1 stopped (SIGSTOP) mid-step: rank 0 times out within --comm.timeout_s and every
#     rank ends, the error naming rank 1;
#   - an exception inside forward on rank 1 only: every rank ends, the line names the rank,
#     the stage and the micro-batch, and rank 0 adds the summary line;
#   - the same exception on two ranks at once: each prints its line once, rank 0 one
#     summary naming both and the first cause;
#   - the disk fills during a checkpoint save (RLIMIT_FSIZE): one clear line, exit 4, the
#     previous checkpoint intact, and a resume from it bitwise equal to the uninterrupted run;
#   - a checkpoint file changed on disk after it was written (same size): the resume refuses
#     it by checksum and continues from the complete one before it, saying so.
#
# usage: faults.sh PPSTAGE "MPIEXEC ARGS" FIXTURES_DIR
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
fixtures=$3
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
trap 'kill -9 $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT
cd "$work"

tiny=(--config "$source_dir/configs/gpt-tiny.ini" --train.threads 1)
timeout_s=5

# The pid of rank `rank` of the job whose mpirun is `launcher` (its environment says).
rank_pid() {
  local launcher=$1 rank=$2 pid
  for pid in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank"; then
      echo "$pid"
      return
    fi
  done
}

# Starts a long run, waits for its third step, sends `signal` to rank 1 and checks that the
# job ends non-zero within `limit` seconds with `expected` in its output.
signal_mid_step() {
  local name=$1 signal=$2 limit=$3 expected=$4
  "${mpiexec[@]}" -np 2 "$ppstage" train "${tiny[@]}" --train.steps 100000 --output.log_every 1 \
    --comm.timeout_s "$timeout_s" < /dev/null > "$name.log" 2>&1 &
  local launcher=$! waited=0 victim=""
  until grep -q "^step *3/" "$name.log" 2> /dev/null; do
    sleep 0.2
    waited=$((waited + 1))
    if ((waited > 600)); then fail "$name: no third step in 120 s"; kill -9 "$launcher"; return; fi
  done
  victim=$(rank_pid "$launcher" 1)
  [[ -n $victim ]] || { fail "$name: no rank 1 among mpirun's children"; kill -9 "$launcher"; return; }
  kill "-$signal" "$victim"
  SECONDS=0
  local code=0
  while kill -0 "$launcher" 2> /dev/null && ((SECONDS <= limit)); do sleep 0.2; done
  if kill -0 "$launcher" 2> /dev/null; then
    fail "$name: the job still runs ${limit} s after SIG$signal"
    kill -CONT "$victim" 2> /dev/null || true
    kill -9 "$launcher" "$victim" 2> /dev/null || true
    return
  fi
  wait "$launcher" || code=$?
  local took=$SECONDS
  if [[ $code == 0 ]]; then
    fail "$name: the job exited 0"
  elif ! grep -qE -- "$expected" "$name.log"; then
    fail "$name: no '$expected' in the output"; tail -5 "$name.log"
  else
    echo "ok: $name: exit $code after ${took} s: $(grep -m1 -E -- "$expected" "$name.log")"
  fi
  SECONDS=0  # mpirun ends a stopped rank too, a moment after it returns
  while kill -0 "$victim" 2> /dev/null && ((SECONDS <= 10)); do sleep 0.2; done
  ! kill -0 "$victim" 2> /dev/null || { fail "$name: rank 1 outlived the job"; kill -9 "$victim"; }
}

signal_mid_step killed KILL $((timeout_s + 5)) "rank 1 .*(exited on signal 9|Killed)"
signal_mid_step stopped STOP $((timeout_s + 10)) \
  "timed out after $timeout_s s: rank 0 .*rank 1"

# --- an exception inside forward on rank 1 only --------------------------------------------
code=0
timeout 120 "${mpiexec[@]}" -np 2 "$ppstage" train --model.name "$fixtures/squeeze_batch.pt" \
  --model.input_dtype float32 --model.input_shape 4,4,8 --train.batch_size 4 \
  --pipeline.microbatches 4 --data.path synthetic --train.steps 2 --train.threads 1 \
  < /dev/null > forward.log 2>&1 || code=$?
line=$(grep -m1 "ppstage: error: \[rank 1\] .*stage 1, micro-batch 0, step 1: forward fails" \
  forward.log) || line=""
if [[ $code == 0 || $code == 124 ]]; then
  fail "forward: exit $code"
elif [[ -z $line ]]; then
  fail "forward: no line naming rank 1, stage 1 and micro-batch 0"; tail -5 forward.log
elif ! grep -q "ppstage: error: rank 1 of 2 failed: \[rank 1\] .*forward fails" forward.log; then
  fail "forward: no summary line from rank 0"; grep "ppstage: error" forward.log
else
  echo "ok: forward: exit $code: $line"
fi

# --- the same exception on two ranks at once (pp 2 x dp 2): each prints its line once,
# rank 0 one summary naming both and the first cause --------------------------------------
code=0
timeout 120 "${mpiexec[@]}" -np 4 "$ppstage" train --model.name "$fixtures/squeeze_batch.pt" \
  --model.input_dtype float32 --model.input_shape 4,4,8 --train.batch_size 8 --train.dp 2 \
  --pipeline.microbatches 4 --data.path synthetic --train.steps 2 --train.threads 1 \
  < /dev/null > two.log 2>&1 || code=$?
summary=$(grep -m1 "ppstage: error: ranks [0-9] and [0-9] of 4 failed; the first: \[rank [0-9]\] .*forward fails" two.log) ||
  summary=""
if [[ $code == 0 || $code == 124 ]]; then
  fail "two ranks: exit $code"
elif [[ -z $summary ]]; then
  fail "two ranks: no summary line"; grep "ppstage: error" two.log
else
  read -r first second <<< "$(sed -E 's/.*ranks ([0-9]) and ([0-9]) of 4.*/\1 \2/' <<< "$summary")"
  for r in "$first" "$second"; do
    n=$(grep -c "^ppstage: error: \[rank $r\] .*forward fails" two.log || true)
    [[ $n == 1 ]] || fail "two ranks: rank $r printed its line $n times"
  done
  [[ $(grep -c "failed; the first" two.log) == 1 ]] || fail "two ranks: not one summary line"
  echo "ok: two ranks: exit $code: $summary"
fi

# --- the disk fills during a checkpoint save ----------------------------------------------
train() { "${mpiexec[@]}" -np 2 "$ppstage" train "${tiny[@]}" --output.log_every 0 \
  --comm.timeout_s 60 "$@" < /dev/null; }
train --train.steps 4 --output.params_dir straight > straight.log 2>&1
train --train.steps 2 --checkpoint.dir ck > saved.log 2>&1
sums() { (cd ck && find . -type f | sort | xargs sha256sum); }
before=$(sums)
# Resumed, and once it runs every rank may write files of 64 KiB at most (RLIMIT_FSIZE, set
# from outside: MPI's start-up needs larger ones): its next checkpoint's tensors do not fit.
"${mpiexec[@]}" -np 2 "$ppstage" train "${tiny[@]}" --train.steps 100000 --output.log_every 1 \
  --comm.timeout_s 60 --checkpoint.dir ck --checkpoint.resume true --checkpoint.every 1000 \
  < /dev/null > full.log 2>&1 &
launcher=$!
until grep -q "^step *5/" full.log 2> /dev/null || ! kill -0 "$launcher" 2> /dev/null; do sleep 0.1; done
for rank in 0 1; do prlimit --fsize=65536 --pid "$(rank_pid "$launcher" "$rank")"; done
code=0
wait "$launcher" || code=$?
line=$(grep -m1 "ppstage: error: cannot save checkpoint" full.log) || line=""
if [[ $code != 4 ]]; then
  fail "disk full: exit $code, not 4"; tail -5 full.log
elif [[ -z $line ]]; then
  fail "disk full: no 'cannot save checkpoint' line"; tail -5 full.log
elif [[ $(sums | grep -v "step-00001000") != "$before" ]]; then
  fail "disk full: the checkpoint of step 2 changed"
else
  echo "ok: disk full: exit 4: $line"
fi
train --train.steps 4 --checkpoint.dir ck --checkpoint.resume true --output.params_dir resumed \
  > resumed.log 2>&1 || fail "disk full: the resume after it failed"
grep -q "^resuming from ck/step-00000002" resumed.log || fail "disk full: not resumed from step 2"
if diff -r straight resumed > /dev/null; then
  echo "ok: disk full: resumed from step 2, the parameters equal the uninterrupted run's bitwise"
else
  fail "disk full: the resumed run's parameters differ from the uninterrupted run's"
fi

# --- a checkpoint file changed on disk after it was written -------------------------------
train --train.steps 4 --checkpoint.dir ck2 --checkpoint.every 2 > ck2.log 2>&1
file=$(find ck2/step-00000004 -type f ! -name manifest.json | sort | head -1)
first=$(head -c 1 "$file" | od -An -tu1 | tr -d ' ')
printf "\\x$(printf %02x $(((first + 1) % 256)))" | dd of="$file" bs=1 conv=notrunc status=none
train --train.steps 6 --checkpoint.dir ck2 --checkpoint.resume true > changed.log 2>&1 ||
  fail "changed file: the resume failed"
if grep -q "ppstage: warning: skipping incomplete checkpoint ck2/step-00000004: .* does not match its checksum" changed.log &&
  grep -q "^resuming from ck2/step-00000002" changed.log; then
  echo "ok: changed file: $(grep -m1 "does not match its checksum" changed.log)"
else
  fail "changed file: no checksum warning and resume from step 2"; head -5 changed.log
fi
exit "$failed"
