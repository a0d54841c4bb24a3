#!/usr/bin/env bash
# The live progress line: under a pseudo-terminal (`script`) rank 0 redraws
# "step i/N  loss ...  tokens/s ...  elapsed ...  eta ..." in place (carriage returns)
# beside the plain step lines; with stdout piped there is no such line, only the plain ones.
#
# usage: progress_line.sh PPSTAGE "MPIEXEC ARGS"
source "$(dirname "$0")/harness.sh"
ppstage=$1
mpiexec=$2
if ! script -qec true /dev/null > /dev/null 2>&1; then
  echo "skip: script(1) cannot make a pseudo-terminal here (bsdutils missing, or no /dev/pts)"
  exit 77
fi
run="$mpiexec -np 2 $ppstage train --train.steps 40 --train.threads 1 --output.log_every 20"
script -qec "$run" "$work/tty.txt" > /dev/null
$run > "$work/piped.txt"
grep -q $'\rstep 40/40  loss [0-9.]*  tokens/s [0-9]*  elapsed [0-9:]*  eta 0:00' "$work/tty.txt" ||
  { echo "FAIL: no live line under a terminal"; failed=1; }
grep -q "^step   20/40" "$work/piped.txt" || { echo "FAIL: no plain step lines when piped"; failed=1; }
grep -q $'\r\|eta' "$work/piped.txt" && { echo "FAIL: a live line when piped"; failed=1; }
[ "$failed" = 0 ] && echo "ok: a live line under a terminal, plain lines when piped"
exit "$failed"
