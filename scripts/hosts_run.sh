#!/usr/bin/env bash
# Runs one command across hosts made of network namespaces on this machine, as
# tests/integration/multi_host.sh does (docs/multi-host.md), then tears them down.
#
# usage: scripts/hosts_run.sh [--rate RATE] [--link D,J,L] [--map-by node] HOSTS -- PROGRAM ARGS...
#   HOSTS   h0:2,h1:2: the hosts and their slots (ranks), named h0, h1, ... in order
#   --rate  each host's link to the switch limited to RATE both ways (tc tbf: 200mbit, 1gbit)
#   --link DELAY_MS,JITTER_MS,LOSS  each host's link through tests/integration/link_emulator.c:
#           frames delayed and dropped both ways (between two hosts a frame crosses two links)
#   --map-by node   consecutive ranks on consecutive hosts (default: fill each host's slots)
# The job starts as `mpirun -np <slots> ... PROGRAM ARGS` on h0; root is needed.
# example: scripts/hosts_run.sh --map-by node h0:2,h1:2 -- build/src/ppstage train \
#            --config configs/gpt-tiny.ini --pipeline.stages 2 --train.dp 2
set -euo pipefail
rate="" link="" mpi_options=()
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --link) link=$2; shift 2 ;;
    --map-by) mpi_options+=(--map-by "$2"); shift 2 ;;
    *) echo "hosts_run.sh: error: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -ge 3 && $2 == -- ]] || { sed -n '5,14p' "$0" >&2; exit 2; }
IFS=, read -r -a specs <<< "$1"
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/../tests/integration/hosts.sh"
hosts_need_open_mpi mpirun
hosts_up "${#specs[@]}"
hosts_hostfile "$work/hostfile" "${specs[@]}"
[[ -z $rate ]] || hosts_link_rate "$rate"
if [[ -n $link ]]; then
  IFS=, read -r delay_ms jitter_ms loss <<< "$link"
  for ((i = 0; i < ${#specs[@]}; ++i)); do hosts_link_emulate "h$i" "$delay_ms" "$jitter_ms" "$loss"; done
fi
slots=0
for spec in "${specs[@]}"; do slots=$((slots + ${spec##*:})); done
program=$1
shift
[[ $program == */* ]] && program=$(realpath "$program")
hosts_mpirun "$work/hostfile" -np "$slots" "${mpi_options[@]}" "$program" "$@"
