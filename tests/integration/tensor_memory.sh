#!/usr/bin/env bash
# What the schedules promise for memory, measured by the counting allocator
# (observe/tensor_memory.h): on gpt-small at p 2 with M 8, the first stage of 1F1B holds
# about p micro-batches of activations where GPipe's holds M (the simulator's peak
# in-flight counts: 2 and 8). Its peak_activation_mb must be at most 0.4 x GPipe's (a
# generous bound: gradients and the loss's buffers come on top of both; figures in
# docs/benchmarks.md).
#
# usage: tensor_memory.sh PPSTAGE "MPIEXEC ARGS" CONFIG
source "$(dirname "$0")/harness.sh"
ppstage_under_mpi "$1" "$2"
config=$3

first_rank() {  # field, metrics.json: the first rank's value
  grep -o "\"$1\": [0-9.e+-]*" "$2" | head -1 | sed 's/.*: //'
}
for schedule in gpipe 1f1b; do
  "${mpiexec[@]}" -np 2 "$ppstage" train --config "$config" --pipeline.schedule "$schedule" \
    --pipeline.microbatches 8 --train.steps 2 --train.threads 1 --output.log_every 0 \
    --output.metrics_json "$work/$schedule.json" > /dev/null
done
gpipe=$(first_rank peak_activation_mb "$work/gpipe.json")
onefoneb=$(first_rank peak_activation_mb "$work/1f1b.json")
echo "rank 0 peak_activation_mb: gpipe $gpipe, 1f1b $onefoneb"
awk -v g="$gpipe" -v o="$onefoneb" 'BEGIN { exit !(g > 0 && o > 0 && o <= 0.4 * g) }' ||
  { echo "FAIL: 1f1b's activations are not at most 0.4 x gpipe's"; exit 1; }
echo "ok: 1f1b holds $(awk -v g="$gpipe" -v o="$onefoneb" 'BEGIN { printf "%.2f", o / g }') x gpipe's activations"
