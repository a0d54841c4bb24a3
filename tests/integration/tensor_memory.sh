#!/usr/bin/env bash
# What the schedules promise for memory, measured by the counting allocator
# (observe/tensor_memory.h): on gpt-small at p 2 with M 8, the first stage of 1F1B holds
# about p micro-batches of activations where GPipe's holds M (the simulator's peak
# in-flight counts: 2 and 8). Its peak_activation_mb must be at most 0.4 x GPipe's (a
# generous bound: gradients and the loss's buffers come on top of both; figures in
# docs/benchmarks.md). And with every block recomputed, 1F1B's peak per rank must not grow
# from 4 to 16 micro-batches of one sample (sends let go as they complete).
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

# A send's tensor is let go once the send completes (runtime/pending_sends.h), not at the
# step's end: with every block recomputed, what a micro-batch keeps is small, and 1F1B's
# peak must not grow with the micro-batches (one-sample micro-batches, 4 and then 16 of
# them; kept to the step's end, 12 more boundary messages of 128 KB added 1.5 MB).
for m in 4 16; do
  "${mpiexec[@]}" -np 2 "$ppstage" train --config "$config" --pipeline.microbatches "$m" \
    --train.batch_size "$m" --train.recompute full --train.steps 2 --train.threads 1 \
    --output.log_every 0 --output.metrics_json "$work/sends_$m.json" > /dev/null
done
for rank in 0 1; do
  few=$(grep -o '"peak_allocated_mb": [0-9.e+-]*' "$work/sends_4.json" | sed -n "$((rank + 1))p" | sed 's/.*: //')
  many=$(grep -o '"peak_allocated_mb": [0-9.e+-]*' "$work/sends_16.json" | sed -n "$((rank + 1))p" | sed 's/.*: //')
  echo "rank $rank peak_allocated_mb with full recomputation: M 4 $few, M 16 $many"
  awk -v a="$few" -v b="$many" 'BEGIN { exit !(a > 0 && b - a <= 0.5) }' ||
    { echo "FAIL: rank $rank's peak grew by more than 0.5 MB from 4 to 16 micro-batches"; exit 1; }
done
echo "ok: the peak does not grow with the micro-batches"
