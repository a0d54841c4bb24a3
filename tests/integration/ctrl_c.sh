#!/usr/bin/env bash
# Ctrl-C during steps longer than mpirun's grace, with mpirun's default options: after a
# Ctrl-C, Open MPI's mpirun passes SIGTERM on to the ranks and SIGKILLs them about a second
# later (odls_base_sigkill_timeout, default 1), so a step of 2-3 s cannot finish first. The
# ranks abandon the step in flight (Note [Abandoning a step]) and save the last completed
# one:
#   - the stop line says so: "stopped by SIGTERM during step N, abandoned before its
#     optimizer step; checkpoint ck/step-... (N-1 steps done)", and that checkpoint is
#     complete;
#   - resumed from it to 2 steps more, the run equals the uninterrupted run of as many
#     steps, losses and parameters bitwise.
#
# usage: ctrl_c.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
trap 'kill -9 $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT
cd "$work"

# A GPT whose steps take 2-3 s on 2 ranks of one thread (2.6 s on a 2-core EPYC).
slow=(--model.d_model 512 --model.layers 4 --model.seq_len 256 --train.batch_size 16
      --train.threads 1 --comm.timeout_s 60)
train() { "${mpiexec[@]}" -np 2 "$ppstage" train "${slow[@]}" "$@"; }

# As a terminal sends it: SIGINT to mpirun's whole process group, once the first step is
# logged and the second is under way.
setsid "${mpiexec[@]}" -np 2 "$ppstage" train "${slow[@]}" --train.steps 1000 \
  --output.log_every 1 --checkpoint.dir ck > stopped.log 2>&1 &
job=$!
while ! grep -q "^step    1/" stopped.log; do
  kill -0 "$job" 2> /dev/null || { cat stopped.log; exit 1; }
  sleep 0.1
done
sleep 0.5
kill -INT -- "-$job"
wait "$job" || true  # mpirun reports the signal itself
line=$(grep -m1 "^stopped by SIGTERM during step [0-9]*, abandoned before its optimizer step; checkpoint ck/step-" stopped.log) ||
  { fail "no stop line that abandons the step"; tail -5 stopped.log; exit 1; }
echo "ok: $line"
done_steps=$(sed -n 's/.*(\([0-9]*\) steps\{0,1\} done).*/\1/p' <<< "$line")
[ -f "ck/step-$(printf %08d "$done_steps")/manifest.json" ] ||
  { fail "checkpoint of step $done_steps is not complete"; ls -R ck; exit 1; }

steps=$((done_steps + 2))
train --train.steps "$steps" --output.log_every 0 --output.metrics_json straight.json \
  --output.params_dir straight > straight.log 2>&1 || { fail "the straight run failed"; tail -5 straight.log; }
train --train.steps "$steps" --output.log_every 0 --checkpoint.dir ck --checkpoint.resume true \
  --output.metrics_json resumed.json --output.params_dir resumed > resumed.log 2>&1 ||
  { fail "the resumed run failed"; tail -5 resumed.log; }
compare_runs "resumed after Ctrl-C against straight ($steps steps)" straight.json resumed.json \
  --rtol 0 --atol 0 || true
exit "$failed"
