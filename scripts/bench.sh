#!/usr/bin/env bash
# Benchmarks whose figures go to docs/benchmarks.md, printed as markdown table rows.
#   scripts/bench.sh split     time of `ppstage split` (best of 3) for GPTs of growing depth
#   scripts/bench.sh comm      MPI point-to-point: ppstage's communicator against raw MPI
#   scripts/bench.sh compile   compile modes side by side (ppstage compare-compile): compile
#                              time against depth, steady step and RSS growth (times: best
#                              of 3 or 5 rounds; memory and numerics: worst)
#   scripts/bench.sh checkpoint  gpt-small at pp 2: save time, size on disk, resume time, and
#                              the step time with --checkpoint.every 50 against none
#   scripts/bench.sh memory    tensor memory per schedule: rank 0's peak activations on
#                              gpt-small at p 2 and 4 with M 8, against the simulator's
#                              peak in-flight micro-batches of stage 0
#   scripts/bench.sh recompute activation recomputation on gpt-small at pp 2 (1F1B, M 8,
#                              seq_len 512): rank 0's (stage 0's) peak activations and the
#                              median step without it, full and selective (every block),
#                              in PPSTAGE_BENCH_ROUNDS (2) interleaved rounds, best of each
#   scripts/bench.sh plan_budget  the planner under a memory budget that needs recomputation
#                              (gpt-small-like and a torch.nn.TransformerEncoder model at 2
#                              ranks): the choice's predicted and measured peak and step,
#                              against every block recomputed (scripts/plan_budget_check.py)
#   scripts/bench.sh plan_shard the planner's choice of a sharded optimizer (gpt-small at 4
#                              ranks, fp32 and bf16): the choice's predicted and measured
#                              peak and step, against it flipped (scripts/plan_shard_check.py)
#   scripts/bench.sh hosts     across 2 hosts made of network namespaces (root), at three
#                              links between them (none; 1 ms / 1 Gbit/s; 5 ms / 200
#                              Mbit/s): the planner's choice, and pp 2 and pp 2 x dp 2 in
#                              both rank orders, each predicted step against the measured
#                              one (scripts/hosts_bench.py; gpt-small, 12 steps a run), in
#                              PPSTAGE_BENCH_PASSES (3) passes of 8.5 minutes, and each
#                              row's median over them
#   scripts/bench.sh trace     the cost of --output.trace: gpt-small at pp 2 (1F1B, M 8), the
#                              median step with the trace on against off, in interleaved
#                              rounds (median of the rounds' ratios), and the file's size
#   scripts/bench.sh schedules every built-in schedule in every compile mode on gpt-small at
#                              pp 2 (M 8): step, predicted step, measured / predicted,
#                              (I+W)/B against 1F1B's B (each over its run's F), peak in
#                              flight, speed-up over one process; medians of
#                              PPSTAGE_BENCH_ROUNDS (2) interleaved rounds, and ZB-H1 / 1F1B
#                              per round. Each round also runs the peer, a hand-written
#                              2-process 1F1B of the same gpt in PyTorch on gloo
#                              (scripts/peers/, whose losses and parameter count
#                              scripts/peers/check_reference.sh checks against ppstage's
#                              first), against which the table's steps are compared;
#                              ppstage's 1F1B also runs cut where the peer cuts
#                              (layers.4) for a like-for-like figure
#   scripts/bench.sh seqlen    documents of different lengths on the embedded text: their
#                              length distribution, then real tokens/s of fixed (padded to
#                              the maximum), bucket and variable on gpt-small (seq_len 256)
#                              at pp 2 in each compile mode
#   scripts/bench.sh precision --train.precision fp32 against bf16 on gpt-small at pp 2:
#                              tensor memory, bytes per message, tokens/s, losses
#   scripts/bench.sh sha256    SHA-256 of 1 GiB: OpenSSL (what checkpoints use) against the
#                              hand-written one it replaced (from git history), 3 rounds
#   scripts/bench.sh balance   --pipeline.balance time against params on gpt-small with
#                              vocab 4096 and 16384 at pp 2 (1F1B, M 8): step of each and
#                              the predicted step of both cuts and the cut, in rounds (3)
#   scripts/bench.sh train     step time of gpt-tiny and gpt-small: one process (full batch)
#                              against mpirun -np 2 with 1F1B (best median of 3 rounds)
#   scripts/bench.sh data      data files: gpt-tiny at pp 2 on the embedded text against the
#                              same bytes as a memory-mapped token file (bare uint16, and
#                              after llm.c's header): tokens/s, medians of 3 interleaved
#                              rounds, losses compared; then a one-step run on a sparse
#                              10 GB token file against one on a small one (the first run,
#                              whose one scan for the largest id fills the page cache, and
#                              the best of 3)
#   scripts/bench.sh plan      `ppstage plan` against real runs: the planner's top 5 and 5
#                              others trained on gpt-small, MobileNetV2 and nn.Transformer
#                              at 2 ranks (scripts/plan_check.py: predicted and measured
#                              step and peak memory, first choice against the fastest,
#                              Spearman), under a memory budget, and the planner alone on
#                              64 ranks and 256 micro-batches
#   scripts/bench.sh tp        tensor parallelism on gpt-small: parameter bytes per rank at tp 1,
#                              2 and 4 (from `ppstage split --train.tp`), then 30 steps of one
#                              process with 1 and 2 threads against tp 2 on 2 ranks (and
#                              pp 2, 1F1B M 8), each compile mode: median step, tokens/s,
#                              tensor bytes held at a step's start per rank, and the share of
#                              the step spent in TP all-reduces (the metrics' tp_s)
#   scripts/bench.sh peers     ppstage against PyTorch's own: torch.distributed.pipelining's
#                              six schedules on gloo (scripts/peers/pipelining_gloo.py) and
#                              ppstage's five in each compile mode, on gpt-small as
#                              scripts/peers/gpt.py saves it (batch 16 x 128, M 8, SGD,
#                              2 processes, one thread each), in alternating rounds
#                              (PPSTAGE_BENCH_ROUNDS, 2); then torch.compile (inductor) of
#                              stage 1 whole against each block alone
#                              (scripts/peers/compile_inductor.py) beside ppstage's modes
#   scripts/bench.sh libtorch  the same ppstage on LibTorch 1.13 and 2.11, alternating:
#                              PPSTAGE_BENCH_OLD names the build of 1.13 (ppstage at
#                              aab600a, the last that builds on it: docs/benchmarks.md
#                              says how); gpt-small in one process, pp 2 with 1F1B and
#                              ZB-V, and compare-compile's compile time and step per mode
# Build first (scripts/test.sh or scripts/demo.sh); PPSTAGE_BUILD_DIR as there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PPSTAGE_BUILD_DIR:-build}
ppstage="$build/src/ppstage"
what=${1:-split}

bench_split() {
  echo "| model | layers | total s | load | capture | example run | plan | extract | peak RSS MB |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for layers in 8 32 96; do
    best=""
    for _ in 1 2 3; do
      json=$(/usr/bin/time -f "%M" -o /tmp/ppstage_bench_rss "$ppstage" split --model.layers "$layers" \
        --model.d_model 256 --model.heads 4 --model.seq_len 128 --train.batch_size 8 \
        --pipeline.stages 4 --json)
      row=$(echo "$json" | python3 -c '
import json, sys
t = json.load(sys.stdin)["timings_s"]
keys = ["load", "capture", "example_run", "plan", "extract"]
print(" | ".join(["%.2f" % sum(t.values())] + ["%.3f" % t[k] for k in keys]))')
      rss=$(( $(cat /tmp/ppstage_bench_rss) / 1024 ))
      total=${row%% *}
      if [[ -z "$best" ]] || awk "BEGIN{exit !($total < ${best%% *})}"; then best="$row | $rss"; fi
    done
    echo "| gpt d256 seq128 batch8 | $layers | $best |"
  done
}

bench_comm() {
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --oversubscribe -np 2 "$ppstage" bench-comm --bench.seconds 0.1 --bench.rounds 11
}

bench_train() {
  local metrics=/tmp/ppstage_bench_train.json
  echo "| config | run | steps | median step s | tokens/s | predicted s | measured bubble | peak RSS MB (max rank) |"
  echo "|---|---|---|---|---|---|---|---|"
  for config in gpt-tiny gpt-small; do
    steps=40
    [[ $config == gpt-small ]] && steps=20
    for np in 1 2; do
      best=""
      for _ in 1 2 3; do
        args=(train --config "configs/$config.ini" --train.steps "$steps" --train.threads 1
              --output.log_every 0 --output.metrics_json "$metrics")
        if [[ $np == 1 ]]; then
          "$ppstage" "${args[@]}" --pipeline.stages 1 --pipeline.microbatches 1 > /dev/null
        else
          OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            mpirun --oversubscribe -np "$np" "$ppstage" "${args[@]}" > /dev/null
        fi
        row=$(python3 -c '
import json, statistics, sys
m = json.load(open(sys.argv[1]))
print("%.4f | %.0f | %.4f | %.3f | %.0f" % (m["measured_step_s"], m["tokens_per_s"],
      m["predicted_makespan_s"], statistics.median(m["bubble_fraction"][1:] or [0]),
      max(r["peak_rss_mb"] for r in m["ranks"])))' "$metrics")
        if [[ -z "$best" ]] || awk "BEGIN{exit !(${row%% *} < ${best%% *})}"; then best=$row; fi
      done
      run="-np 1, 1 stage, full batch"
      [[ $np == 2 ]] && run="-np 2, 1F1B, 4 micro-batches"
      echo "| $config | $run | $steps | $best |"
    done
  done
}

# Rounds of compare-compile --json (one document after another in file $2) summed up per
# mode: times are the best of the rounds (noise only adds), memory and loss difference
# the worst. Prints one markdown row per mode, prefixed by $1.
compile_rows() {
  python3 -c '
import json, sys
text, at, best = open(sys.argv[2]).read(), 0, {}
while text[at:].strip():
    doc, at = json.JSONDecoder().raw_decode(text, len(text) - len(text[at:].lstrip()))
    for m in doc["modes"]:
        b = best.setdefault(m["mode"], dict(m))
        for k in ("compile_time_s", "step_time_s"):
            b[k] = min(b[k], m[k])
        for k in ("peak_rss_mb", "rss_growth_mb_per_100_steps", "loss_max_rel_diff"):
            b[k] = max(b[k], m[k])
base = best["none"]["step_time_s"]
for m in best.values():
    print("| %s | %s | %.3f | %d | %d | %.4f | %.2f | %.0f | %.2f | %.1e |" % (sys.argv[1],
          m["mode"], m["compile_time_s"], m["graphs_compiled"], m["cache_hits"],
          m["step_time_s"], m["step_time_s"] / base, m["peak_rss_mb"],
          m["rss_growth_mb_per_100_steps"], m["loss_max_rel_diff"]))' "$1" "$2"
}

bench_compile() {
  local rounds=/tmp/ppstage_bench_compile_rounds.json
  local header="| compile s | graphs compiled | cache hits | steady step s | vs none | peak RSS MB | RSS MB per 100 steps | loss rel diff |"
  local rule="|---|---|---|---|---|---|---|---|---|---|"
  # Compile time against depth: a narrow GPT, so that steps take milliseconds and what
  # the first steps cost over them is compiling, not the machine's jitter.
  echo "| layers | mode $header"; echo "$rule"
  for layers in 4 8 16 32; do
    : > "$rounds"
    for _ in 1 2 3; do
      "$ppstage" compare-compile --model.layers "$layers" --model.d_model 64 --model.heads 4 \
        --model.seq_len 32 --train.batch_size 2 --pipeline.stages 1 --pipeline.microbatches 1 \
        --train.steps 12 --train.threads 1 --data.path synthetic --json >> "$rounds"
    done
    compile_rows "$layers" "$rounds"
  done
  echo
  # Steady step and memory over 300 steps of the ready configs (steps of 20-40 ms swing by
  # 30% here: the best of 5 rounds).
  echo "| config | mode $header"; echo "$rule"
  for config in gpt-tiny mlp-tiny; do
    : > "$rounds"
    for _ in 1 2 3 4 5; do
      "$ppstage" compare-compile --config "configs/$config.ini" --pipeline.stages 1 \
        --train.steps 300 --train.threads 1 --json >> "$rounds"
    done
    compile_rows "$config" "$rounds"
  done
}

bench_checkpoint() {
  local dir=/tmp/ppstage_bench_ck
  local run=(mpirun --allow-run-as-root --oversubscribe -np 2 "$ppstage" train
             --config configs/gpt-small.ini --train.threads 1 --output.log_every 0)
  rm -rf "$dir"
  "${run[@]}" --train.steps 100 --output.metrics_json /tmp/ppstage_bench_plain.json > /dev/null
  "${run[@]}" --train.steps 100 --checkpoint.dir "$dir" --checkpoint.every 50 \
    --output.metrics_json /tmp/ppstage_bench_ck.json > /dev/null
  "${run[@]}" --train.steps 101 --checkpoint.dir "$dir" --checkpoint.resume true \
    --output.metrics_json /tmp/ppstage_bench_resume.json > /dev/null
  local bytes
  bytes=$(du -sb "$dir/step-00000100" | cut -f1)
  python3 - "$bytes" <<'PY'
import json, sys
plain = json.load(open("/tmp/ppstage_bench_plain.json"))
ck = json.load(open("/tmp/ppstage_bench_ck.json"))
resume = json.load(open("/tmp/ppstage_bench_resume.json"))
saves = [c["seconds"] for c in ck["checkpoints"]]
steps = len(ck["step_time_s"])
mean = lambda xs: sum(xs) / len(xs)
print("| saves | save s (each) | size MB | resume s | step s, none | step s, every 50 | save cost per step |")
print("|---|---|---|---|---|---|---|")
print("| %d | %s | %.1f | %.3f | %.3f | %.3f | %.4f s (%.1f%%) |" % (
    len(saves), ", ".join("%.3f" % s for s in saves), int(sys.argv[1]) / 2**20,
    resume["resume_s"], mean(plain["step_time_s"]), mean(ck["step_time_s"]),
    sum(saves) / steps, 100 * sum(saves) / steps / mean(plain["step_time_s"])))
PY
}

bench_memory() {
  echo "| p | schedule | simulated peak in flight (stage 0) | ratio to gpipe, simulated | rank 0 peak activations MB | ratio to gpipe, measured | rank 0 peak tensors MB |"
  echo "|---|---|---|---|---|---|---|"
  for p in 2 4; do
    for schedule in gpipe 1f1b zb-h1; do
      mpirun --allow-run-as-root --oversubscribe -np "$p" "$ppstage" train \
        --config configs/gpt-small.ini --pipeline.schedule "$schedule" --pipeline.microbatches 8 \
        --train.steps 2 --train.threads 1 --output.log_every 0 \
        --output.metrics_json "/tmp/ppstage_bench_mem_$schedule.json" > /dev/null
      "$ppstage" schedule --pipeline.schedule "$schedule" --pipeline.stages "$p" \
        --pipeline.microbatches 8 --json > "/tmp/ppstage_bench_sim_$schedule.json"
    done
    python3 - "$p" <<'PY'
import json, sys
p = sys.argv[1]
def load(schedule):
    run = json.load(open(f"/tmp/ppstage_bench_mem_{schedule}.json"))["ranks"][0]
    sim = json.load(open(f"/tmp/ppstage_bench_sim_{schedule}.json"))["peak_inflight"][0]
    return run, sim
gpipe_run, gpipe_sim = load("gpipe")
for schedule in ["gpipe", "1f1b", "zb-h1"]:
    run, sim = load(schedule)
    print("| %s | %s | %d | %.2f | %.1f | %.2f | %.1f |" % (
        p, schedule, sim, sim / gpipe_sim, run["peak_activation_mb"],
        run["peak_activation_mb"] / gpipe_run["peak_activation_mb"], run["peak_allocated_mb"]))
PY
  done
}

bench_recompute() {
  local rounds=${PPSTAGE_BENCH_ROUNDS:-2} round policy
  for ((round = 0; round < rounds; round++)); do
    for policy in none full selective; do
      mpirun --allow-run-as-root --oversubscribe -np 2 "$ppstage" train \
        --config configs/gpt-small.ini --model.seq_len 512 --pipeline.microbatches 8 \
        --train.recompute "$policy" --train.steps 4 --train.threads 1 --output.log_every 0 \
        --output.metrics_json "/tmp/ppstage_bench_recompute_${policy}_$round.json" > /dev/null
    done
  done
  python3 - "$rounds" <<'PY'
import json, sys
rounds = int(sys.argv[1])
def best(policy):
    runs = [json.load(open(f"/tmp/ppstage_bench_recompute_{policy}_{r}.json")) for r in range(rounds)]
    rank0 = [m["ranks"][0] for m in runs]
    return (min(r["peak_activation_mb"] for r in rank0), min(m["measured_step_s"] for m in runs),
            max(r["recompute_s"] for r in rank0) / 4, runs[0]["final_loss"])
none = best("none")
print("| recompute | rank 0 peak activations MB | reduction | median step s | step / none | rank 0 recompute s per step | final loss |")
print("|---|---|---|---|---|---|---|")
for policy in ["none", "full", "selective"]:
    act, step, rec, loss = best(policy)
    print("| %s | %.1f | %.2fx | %.3f | %.3f | %.3f | %.6f |" % (
        policy, act, none[0] / act, step, step / none[1], rec, loss))
PY
}

# The planner choosing recomputation under a memory budget (scripts/plan_budget_check.py):
# gpt-small-like and a torch.nn.TransformerEncoder model (scripts/make_encoder_model.py) at
# 2 ranks, budgets far below the fastest configuration's peak without recomputation; the
# chosen configuration against the same with every block recomputed, in
# PPSTAGE_BENCH_ROUNDS (3) alternating rounds of 10 steps.
bench_plan_budget() {
  local rounds=${PPSTAGE_BENCH_ROUNDS:-3} dir
  dir=$(mktemp -d)
  echo "### gpt-small-like, SGD, batch 16 x 128"
  scripts/plan_budget_check.py "$ppstage" "$rounds" 10 45,40 -- \
    --config configs/gpt-small.ini --train.optimizer sgd
  echo "### torch.nn.TransformerEncoder, 8 layers of d 256, SGD, batch 16 x 128"
  scripts/python scripts/make_encoder_model.py "$dir/encoder.pt"
  scripts/plan_budget_check.py "$ppstage" "$rounds" 10 60,50 -- \
    --model.name "$dir/encoder.pt" --model.vocab_size 256 --model.seq_len 128 \
    --train.batch_size 16 --data.path synthetic --train.optimizer sgd --train.lr 0.01
  rm -rf "$dir"
}

# The planner's choice of a sharded optimizer (scripts/plan_shard_check.py): gpt-small at 4
# ranks, AdamW in fp32 (no budget, and 100 MB) and bf16 (no budget); the chosen
# configuration against the same with --train.shard_optimizer flipped, in
# PPSTAGE_BENCH_ROUNDS (7) alternating rounds of 8 steps.
bench_plan_shard() {
  local rounds=${PPSTAGE_BENCH_ROUNDS:-7}
  echo "### gpt-small, AdamW, fp32, 4 ranks"
  scripts/plan_shard_check.py "$ppstage" 4 "$rounds" 8 none,100 -- --config configs/gpt-small.ini
  echo "### gpt-small, AdamW, bf16, 4 ranks"
  scripts/plan_shard_check.py "$ppstage" 4 "$rounds" 8 none -- \
    --config configs/gpt-small.ini --train.precision bf16
}

# Across hosts (scripts/hosts_bench.py): gpt-small on 2 hosts of namespaces, each link
# setting's plan, its choice trained, and pp 2 and pp 2 x dp 2 (both rank orders) trained with
# --pipeline.balance time, predicted against measured; the sweep in PPSTAGE_BENCH_PASSES
# passes, then each row's median.
bench_hosts() {
  scripts/hosts_bench.py "$ppstage" "${PPSTAGE_BENCH_STEPS:-12}" none,1/1gbit,5/200mbit \
    --passes "${PPSTAGE_BENCH_PASSES:-3}" -- \
    --config configs/gpt-small.ini
}

bench_trace() {
  local rounds=${PPSTAGE_BENCH_ROUNDS:-6} steps=${PPSTAGE_BENCH_STEPS:-30}
  local run=(mpirun --allow-run-as-root --oversubscribe -np 2 "$ppstage" train
             --config configs/gpt-small.ini --pipeline.microbatches 8 --train.steps "$steps"
             --train.threads 1 --output.log_every 0)
  for round in $(seq "$rounds"); do  # odd rounds start with the trace off, even ones on
    for mode in $( ((round % 2)) && echo off on || echo on off); do
      local trace=()
      [[ $mode == on ]] && trace=(--output.trace /tmp/ppstage_bench_trace.json)
      "${run[@]}" --output.metrics_json "/tmp/ppstage_bench_${mode}_$round.json" "${trace[@]}" \
        > /dev/null
    done
  done
  python3 - "$rounds" "$(stat -c %s /tmp/ppstage_bench_trace.json)" <<'PY'
import json, statistics, sys
rounds, size = int(sys.argv[1]), int(sys.argv[2])
def step(path):  # the median step after the first five (warm-up)
    return statistics.median(json.load(open(path))["step_time_s"][5:])
print("| round | median step s, trace off | median step s, trace on | on / off |")
print("|---|---|---|---|")
ratios = []
for r in range(1, rounds + 1):
    off, on = step(f"/tmp/ppstage_bench_off_{r}.json"), step(f"/tmp/ppstage_bench_on_{r}.json")
    ratios.append(on / off)
    print("| %d | %.4f | %.4f | %.4f |" % (r, off, on, on / off))
trace = json.load(open("/tmp/ppstage_bench_trace.json"))["traceEvents"]
print("\nmedian ratio %.4f (%+.2f%%); trace file %.2f MB, %d events" % (
    statistics.median(ratios), 100 * (statistics.median(ratios) - 1), size / 2**20, len(trace)))
# A bound from inside the last traced run: every recording call falls between the end of
# one event and the start of the next on its rank, so these gaps (which also hold the
# executor's own bookkeeping) bound what tracing costs a step.
steps = {}
for e in trace:
    if e["ph"] == "X" and e["args"]["step"] > 5:
        steps.setdefault((e["pid"], e["args"]["step"]), []).append(e)
for pid in sorted({pid for pid, _ in steps}):
    gaps, spans, counts = [], [], []
    for (p, _), events in steps.items():
        if p != pid:
            continue
        events.sort(key=lambda e: e["ts"])
        gaps.append(sum(max(0.0, b["ts"] - a["ts"] - a["dur"]) for a, b in zip(events, events[1:])))
        spans.append(events[-1]["ts"] + events[-1]["dur"] - events[0]["ts"])
        counts.append(len(events))
    print("rank %d: %d events a step; untraced gaps between them %.2f ms of a %.1f ms step "
          "(%.2f%%, median over steps)" % (pid, statistics.median(counts),
          statistics.median(gaps) / 1e3, statistics.median(spans) / 1e3,
          100 * statistics.median(gaps) / statistics.median(spans)))
PY
}

bench_schedules() {
  local steps=${PPSTAGE_BENCH_STEPS:-12} rounds=${PPSTAGE_BENCH_ROUNDS:-2}
  local dir=/tmp/ppstage_bench_sched
  local base=(--config configs/gpt-small.ini --train.steps "$steps" --train.threads 1
              --output.log_every 0)
  # Rounds interleave every run (this machine drifts by 5-8% from one minute to the next);
  # the table gives medians over rounds. PPSTAGE_BENCH_REPORT_ONLY=1: the table again from
  # the last runs' files.
  mkdir -p "$dir"
  # PPSTAGE_BENCH_MODES and PPSTAGE_BENCH_SCHEDULES narrow the runs (more rounds of fewer).
  local modes=${PPSTAGE_BENCH_MODES:-none stage block}
  local schedules=${PPSTAGE_BENCH_SCHEDULES:-gpipe 1f1b interleaved-1f1b zb-h1 zb-v}
  [[ -n ${PPSTAGE_BENCH_REPORT_ONLY:-} ]] || rm -f "$dir"/r*_*.json
  # The peer (PPSTAGE_BENCH_PEER=0: without): checked equal to ppstage once, then timed in
  # every round, on gpt-small as saved by scripts/peers/gpt.py.
  local peer=${PPSTAGE_BENCH_PEER:-1}
  if [[ $peer == 1 && -z ${PPSTAGE_BENCH_REPORT_ONLY:-} ]]; then
    PPSTAGE="$ppstage" STEPS=4 scripts/peers/check_reference.sh > "$dir/peer_check.log" ||
      { cat "$dir/peer_check.log" >&2; exit 1; }
    tail -n 1 "$dir/peer_check.log"
  fi
  local round mode
  for round in $([[ -n ${PPSTAGE_BENCH_REPORT_ONLY:-} ]] || seq 1 "$rounds"); do
  if [[ $peer == 1 ]]; then
    scripts/python scripts/peers/gpt_1f1b_gloo.py --save "$dir/peer_gpt_small.pt" \
      --steps "$steps" --json "$dir/r${round}_peer.json" > /dev/null
    mpirun --allow-run-as-root --oversubscribe -np 2 "$ppstage" train "${base[@]}" \
      --pipeline.stages 2 --pipeline.split_points layers.4 --pipeline.schedule 1f1b \
      --pipeline.microbatches 8 --output.metrics_json "$dir/r${round}_1f1b_cut.json" > /dev/null
  fi
  for mode in $modes; do
    local out="$dir/r$round"
    "$ppstage" train "${base[@]}" --pipeline.stages 1 --pipeline.microbatches 1 \
      --compile.mode "$mode" --output.metrics_json "${out}_one_$mode.json" > /dev/null
    for schedule in $schedules; do
      local layout=(--pipeline.stages 2)
      [[ $schedule == interleaved-1f1b ]] && layout=(--pipeline.stages 4)
      [[ $schedule == zb-v ]] && layout=(--pipeline.stages 4 --pipeline.placement v)
      mpirun --allow-run-as-root --oversubscribe -np 2 "$ppstage" train "${base[@]}" \
        "${layout[@]}" --pipeline.schedule "$schedule" --pipeline.microbatches 8 \
        --compile.mode "$mode" --output.metrics_json "${out}_${schedule}_$mode.json" > /dev/null
      "$ppstage" schedule "${layout[@]}" --pipeline.stages_per_rank $(( ${layout[1]} / 2 )) \
        --pipeline.schedule "$schedule" --pipeline.microbatches 8 --json \
        > "${out}_${schedule}_sim.json"
    done
  done
  done
  python3 - "$dir" "$modes" "$schedules" <<'PY'
import glob, json, statistics, sys
dir, modes, schedules = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
rounds = sorted({p.split("/")[-1].split("_")[0] for p in glob.glob(f"{dir}/r*_one_{modes[0]}.json")})
load = lambda r, name: json.load(open(f"{dir}/{r}_{name}.json"))
med = statistics.median
print("| mode | schedule | step s | predicted step s | measured / predicted | (I+W) / B | peak in flight (stage 0) | speed-up over one process |")
print("|---|---|---|---|---|---|---|---|")
cost = lambda run, kind: sum(r["action_costs_s"][kind] for r in run["ranks"])
zb_over_1f1b = {}
for mode in modes:
    # B of the same stages (1F1B's for 2 stages, interleaved 1F1B's for zb-v's 4), over
    # F in each run: the forwards are the same work, so the ratio does not move with the
    # machine's speed from one run to the next
    b_of = lambda r, name: cost(load(r, f"{name}_{mode}"), "B") / cost(load(r, f"{name}_{mode}"), "F")
    for schedule in schedules:
        runs = [load(r, f"{schedule}_{mode}") for r in rounds]
        step = med(run["measured_step_s"] for run in runs)
        predicted = med(run["predicted_step_s"] for run in runs)
        ratio = med(run["measured_step_s"] / run["predicted_step_s"] for run in runs)
        one = med(load(r, f"one_{mode}")["measured_step_s"] / run["measured_step_s"]
                  for r, run in zip(rounds, runs))
        iw = ""
        base = "1f1b" if schedule == "zb-h1" else "interleaved-1f1b"
        if schedule.startswith("zb") and base in schedules:
            iw = "%.3f" % med((cost(run, "I") + cost(run, "W")) / cost(run, "F") / b_of(r, base)
                              for r, run in zip(rounds, runs))
        peak = load(rounds[0], f"{schedule}_sim")["peak_inflight"][0]
        print("| %s | %s | %.3f | %.3f | %.3f | %s | %d | %.2f |" % (
            mode, schedule, step, predicted, ratio, iw, peak, one))
    if "zb-h1" in schedules and "1f1b" in schedules:
        zb_over_1f1b[mode] = [load(r, f"zb-h1_{mode}")["measured_step_s"] /
                              load(r, f"1f1b_{mode}")["measured_step_s"] for r in rounds]
print()
print("ZB-H1 step / 1F1B step, each round (runs back to back) and the median:")
for mode, ratios in zb_over_1f1b.items():
    print("- %s: %s; median %.3f" % (mode, ", ".join("%.3f" % x for x in ratios), med(ratios)))
# Against the peer: the steady step (the median after the first) of both, each round.
steady = lambda times: med(times[1:])
if all(glob.glob(f"{dir}/{r}_peer.json") for r in rounds):
    peer = [steady(load(r, "peer")["step_time_s"]) for r in rounds]
    cut = med(p / steady(load(r, "1f1b_cut")["step_time_s"]) for r, p in zip(rounds, peer))
    print()
    print("The peer (hand-written 1F1B, PyTorch on gloo): median step %.3f s; ppstage 1F1B "
          "cut where it cuts (layers.4, compile none) %.2fx its speed" % (med(peer), cut))
    for mode in modes:
        speedups = {s: med(p / steady(load(r, f"{s}_{mode}")["step_time_s"])
                           for r, p in zip(rounds, peer)) for s in schedules}
        best = max(speedups, key=speedups.get)
        line = "- %s: " % mode
        if "1f1b" in speedups:
            line += "1F1B %.2fx the peer's speed, " % speedups["1f1b"]
        print(line + "best %s %.2fx" % (best, speedups[best]))
if "1f1b" in schedules:
    M = 8
    print()
    print("1F1B's speed-up over one process against the ideal 2M/(M+1) = %.3f:" % (2 * M / (M + 1)))
    for mode in modes:
        one = med(steady(load(r, f"one_{mode}")["step_time_s"]) /
                  steady(load(r, f"1f1b_{mode}")["step_time_s"]) for r in rounds)
        print("- %s: %.2f, %.3f of the ideal" % (mode, one, one / (2 * M / (M + 1))))
PY
}

# --pipeline.balance time against params: gpt-small with a wider vocabulary (its tied LM
# head grows with it) on 2 ranks, 1F1B, M 8; rounds interleave the two.
bench_balance() {
  local steps=${PPSTAGE_BENCH_STEPS:-10} rounds=${PPSTAGE_BENCH_ROUNDS:-3}
  local dir=/tmp/ppstage_bench_balance vocab balance round
  mkdir -p "$dir"
  echo "| vocab | round | params: step s | time: step s | time / params | predicted by params | predicted by time | time's cut |"
  echo "|---|---|---|---|---|---|---|---|"
  for vocab in 4096 16384; do
    for round in $(seq 1 "$rounds"); do
      for balance in params time; do
        mpirun --allow-run-as-root --oversubscribe -np 2 "$ppstage" train \
          --config configs/gpt-small.ini --model.vocab_size "$vocab" --train.steps "$steps" \
          --train.threads 1 --output.log_every 0 --pipeline.stages 2 \
          --pipeline.microbatches 8 --pipeline.balance "$balance" \
          --output.metrics_json "$dir/${vocab}_${balance}_$round.json" > "$dir/${vocab}_${balance}_$round.log"
      done
      python3 - "$dir" "$vocab" "$round" <<'PY'
import json, re, sys
dir, vocab, round = sys.argv[1:]
step = lambda b: json.load(open(f"{dir}/{vocab}_{b}_{round}.json"))["measured_step_s"]
line = [l for l in open(f"{dir}/{vocab}_time_{round}.log") if "pipeline.balance time:" in l][0]
cut, after, before = re.findall(
    r"cut at (\S+), predicted step ([0-9.]+) s \(balanced by params: ([0-9.]+) s\)", line)[0]
print("| %s | %s | %.3f | %.3f | %.3f | %s | %s | %s |" % (vocab, round, step("params"),
      step("time"), step("time") / step("params"), before, after, cut))
PY
    done
  done
}

# SHA-256 of 1 GiB, as a checkpoint's files are checked: OpenSSL's EVP digest (what
# src/checkpoint/sha256.cpp uses) against the hand-written FIPS 180-4 it replaced (taken
# from git history, commit 3c353a5), both -O2, 3 rounds. Needs the git history.
bench_sha256() {
  local dir
  dir=$(mktemp -d)
  git show 3c353a5:src/checkpoint/sha256.cpp | sed 's/sha256Hex/handWrittenSha256Hex/g' > "$dir/old.cpp"
  cat > "$dir/bench.cpp" <<'CPP'
#include <openssl/evp.h>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
namespace ppstage { std::string handWrittenSha256Hex(const void* data, size_t size); }
static std::string evpHex(const void* data, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data, size, md, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned i = 0; i < n; ++i) hex += "0123456789abcdef"[md[i] >> 4], hex += "0123456789abcdef"[md[i] & 15];
  return hex;
}
int main() {
  std::vector<unsigned char> bytes(size_t(1) << 30);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
  using Clock = std::chrono::steady_clock;
  for (int round = 1; round <= 3; ++round) {
    const auto t0 = Clock::now();
    const std::string a = ppstage::handWrittenSha256Hex(bytes.data(), bytes.size());
    const auto t1 = Clock::now();
    const std::string b = evpHex(bytes.data(), bytes.size());
    const auto t2 = Clock::now();
    std::printf("| %d | %.3f | %.3f | %s |\n", round, std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count(), a == b ? "yes" : "NO");
  }
}
CPP
  g++ -O2 -std=c++17 -Iinclude "$dir/bench.cpp" "$dir/old.cpp" -lcrypto -o "$dir/bench"
  echo "| round | hand-written s | OpenSSL s | same digest |"
  echo "|---|---|---|---|"
  "$dir/bench"
  rm -rf "$dir"
}

bench_data() {
  local dir
  dir=$(mktemp -d)
  scripts/python scripts/make_token_files.py src/data/corpus/jargon-file-4.4.7-excerpt.txt \
    "$dir/header" --val_fraction 0 > /dev/null
  scripts/python scripts/make_token_files.py src/data/corpus/jargon-file-4.4.7-excerpt.txt \
    "$dir/bare" --val_fraction 0 --bare > /dev/null
  local mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
  local train=(train --config configs/gpt-tiny.ini --train.steps 60 --output.log_every 0
               --train.threads 1)
  declare -A paths=([embedded]="" [tokens]="$dir/bare/train.bin" [tokens-header]="$dir/header/train.bin")
  for round in 1 2 3; do
    for name in embedded tokens tokens-header; do
      "${mpirun[@]}" "$ppstage" "${train[@]}" --data.path "${paths[$name]}" \
        --output.metrics_json "$dir/$name-$round.json" > /dev/null
    done
  done
  echo "| data | tokens/s (median of 3 rounds) | losses as the embedded text's |"
  echo "|---|---|---|"
  scripts/python - "$dir" <<'PY'
import json, statistics, sys
d = sys.argv[1]
runs = {n: [json.load(open(f"{d}/{n}-{r}.json")) for r in (1, 2, 3)] for n in ("embedded", "tokens", "tokens-header")}
for name, label in (("embedded", "embedded text (in the binary)"), ("tokens", "uint16 token file, mmap"),
                    ("tokens-header", "uint16 token file after llm.c's header, mmap")):
    rate = statistics.median(r["tokens_per_s"] for r in runs[name])
    same = "bitwise" if runs[name][0]["losses"] == runs["embedded"][0]["losses"] else "DIFFER"
    print(f"| {label} | {rate:.0f} | {same} |")
PY
  truncate -s 10G "$dir/big.bin"  # sparse: 5.4 G uint16 zeros
  echo
  echo "| token file | ppstage train of 1 step, s: first run | best of 3 |"
  echo "|---|---|---|"
  for name in bare/train.bin big.bin; do
    first=""
    best=""
    for _ in 1 2 3; do
      start=$(date +%s.%N)
      "$ppstage" train --config configs/gpt-tiny.ini --pipeline.stages 1 --train.steps 1 \
        --data.path "$dir/$name" --data.format tokens --train.threads 1 > /dev/null
      seconds=$(awk "BEGIN{print $(date +%s.%N) - $start}")
      [[ -n "$first" ]] || first=$seconds
      if [[ -z "$best" ]] || awk "BEGIN{exit !($seconds < $best)}"; then best=$seconds; fi
    done
    printf "| %s (%s bytes) | %.2f | %.2f |\n" "$name" "$(stat -c %s "$dir/$name")" "$first" "$best"
  done
  rm -rf "$dir"
}

# --train.precision fp32 against bf16 on gpt-small at pp 2 (1F1B, M 4, 30 steps): tensor
# memory per rank (peak, and its activations and gradients), the bytes of one micro-batch's
# message at the cut, tokens/s, and the losses (bf16 against fp32).
bench_precision() {
  local dir
  dir=$(mktemp -d)
  local mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
  for precision in fp32 bf16; do
    "${mpirun[@]}" "$ppstage" train --config configs/gpt-small.ini --train.steps 30 \
      --output.log_every 0 --train.threads 1 --train.precision "$precision" \
      --output.metrics_json "$dir/$precision.json" > /dev/null
  done
  echo "| precision | peak tensor MB, rank 0 / 1 | activations MB, rank 0 / 1 | message at the cut, KiB per micro-batch | tokens/s | final loss (mean of last 10) |"
  echo "|---|---|---|---|---|---|"
  scripts/python - "$dir" <<'PY'
import json, statistics, sys
d = sys.argv[1]
for name in ("fp32", "bf16"):
    m = json.load(open(f"{d}/{name}.json"))
    peak = " / ".join(f"{r['peak_allocated_mb']:.1f}" for r in m["ranks"])
    act = " / ".join(f"{r['peak_activation_mb']:.1f}" for r in m["ranks"])
    msg = " / ".join(f"{b / 1024:.1f}" for b in m["message_bytes"])
    print(f"| {m['precision']} | {peak} | {act} | {msg} | {m['tokens_per_s']:.0f} | "
          f"{statistics.mean(m['losses'][-10:]):.4f} |")
PY
  rm -rf "$dir"
}

# Documents of different lengths (--data.seq_len_policy) on the embedded text's paragraphs:
# first their length distribution (the rules of src/data/documents.cpp); then gpt-small at
# seq_len 256, pp 2 (1F1B, M 4, 30 steps), in each compile mode, with every document padded
# to 256 (fixed), to buckets of 64, 128 and 256, and to each micro-batch's longest
# (variable; also with --compile.dynamic true in the compiled modes): real tokens/s (the
# median over steps of each step's real tokens over its time), tokens per step with and
# without padding, the median step, the most executors one graph got, and the speed-up in
# real tokens/s over fixed in the same mode.
bench_seqlen() {
  local dir
  dir=$(mktemp -d)
  local mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
  scripts/python - src/data/corpus/jargon-file-4.4.7-excerpt.txt <<'PY'
import sys
text = open(sys.argv[1], "rb").read()
lengths, begin, pos = [], None, 0
for line in text.split(b"\n"):
    end = min(pos + len(line) + 1, len(text))
    blank = line.strip(b" \t\r") == b""
    if blank and begin is not None:
        lengths.append(pos - begin)
        begin = None
    elif not blank and begin is None:
        begin = pos
    pos = end
if begin is not None:
    lengths.append(len(text) - begin)
lengths.sort()
n = len(lengths)
q = lambda p: lengths[min(n - 1, int(p * n))]
print(f"{n} paragraphs, bytes: min {lengths[0]}, p10 {q(.1)}, p25 {q(.25)}, median {q(.5)}, "
      f"p75 {q(.75)}, p90 {q(.9)}, p99 {q(.99)}, max {lengths[-1]}, "
      f"mean {sum(lengths) / n:.1f}")
for cut in (64, 128, 256):
    share = sum(1 for x in lengths if x <= cut + 1) / n
    print(f"  {100 * share:.1f}% fit a sample of {cut} tokens ({cut + 1} bytes)")
PY
  echo
  echo "| compile | policy | real tokens/s | tokens per step, real / padded | median step s | executors per graph | real tokens/s over fixed |"
  echo "|---|---|---|---|---|---|---|"
  for mode in none stage block; do
    local runs=("fixed|--data.documents true" "bucket|--data.buckets 64,128" "variable|")
    [ "$mode" != none ] && runs+=("variable dynamic|--compile.dynamic true")
    for run in "${runs[@]}"; do
      local name=${run%%|*} extra
      read -r -a extra <<< "${run#*|}"
      local policy=${name%% *}
      "${mpirun[@]}" "$ppstage" train --config configs/gpt-small.ini --model.seq_len 256 \
        --train.steps 30 --pipeline.microbatches 4 --output.log_every 0 --train.threads 1 \
        --compile.mode "$mode" --compile.max_respecializations 100000 \
        --data.seq_len_policy "$policy" "${extra[@]}" \
        --output.metrics_json "$dir/$mode-${name// /-}.json" > /dev/null
    done
    scripts/python - "$dir" "$mode" <<'PY'
import json, statistics, sys
d, mode = sys.argv[1], sys.argv[2]
names = ["fixed", "bucket", "variable"] + ([] if mode == "none" else ["variable dynamic"])
runs = {n: json.load(open(f"{d}/{mode}-{n.replace(' ', '-')}.json")) for n in names}
base = runs["fixed"]["tokens_per_s"]
for n, m in runs.items():
    print(f"| {mode} | {n} | {m['tokens_per_s']:.0f} | {m['tokens_per_step']} / "
          f"{m['padded_tokens_per_step']} | {m['measured_step_s']:.3f} | "
          f"{m['compile']['specializations_per_graph']} | {m['tokens_per_s'] / base:.2f}x |")
PY
  done
  rm -rf "$dir"
}

bench_tp() {
  local dir
  dir=$(mktemp -d)
  local mpirun=(mpirun --allow-run-as-root --oversubscribe)
  echo "| tp | parameters held per rank | bytes per rank | of tp 1 |"
  echo "|---|---|---|---|"
  for tp in 1 2 4; do
    "$ppstage" split --config configs/gpt-small.ini --pipeline.stages 1 --train.tp "$tp" --json \
      > "$dir/split-$tp.json"
    scripts/python - "$dir/split-$tp.json" "$tp" <<'PY'
import json, sys
plan, tp = json.load(open(sys.argv[1])), int(sys.argv[2])
if tp == 1:
    held = sum(s["num_params"] for s in plan["stages"])
else:
    stages = plan["tensor_parallel"]["stages"]
    held = sum(s["sharded_params"] // tp + s["replicated_params"] for s in stages)
whole = sum(s["num_params"] for s in plan["stages"])
print(f"| {tp} | {held} | {4 * held / 2**20:.2f} MB | {held / whole:.3f} |")
PY
  done
  echo
  echo "| compile | run | median step s | tokens/s | tensors at step start MB (rank 0) | TP all-reduces per step | TP share of the step |"
  echo "|---|---|---|---|---|---|---|"
  for mode in none stage; do
    local runs=("1 process, 1 thread|1|--train.threads 1" "1 process, 2 threads|1|--train.threads 2"
                "tp 2 (2 ranks)|2|--train.threads 1 --train.tp 2"
                "pp 2, 1F1B M 8 (2 ranks)|2|--train.threads 1 --pipeline.microbatches 8")
    for run in "${runs[@]}"; do
      IFS='|' read -r name np extra <<< "$run"
      read -r -a extra <<< "$extra"
      "${mpirun[@]}" -np "$np" "$ppstage" train --config configs/gpt-small.ini --train.steps 30 \
        --output.log_every 0 --compile.mode "$mode" "${extra[@]}" \
        --output.metrics_json "$dir/run.json" > /dev/null
      scripts/python - "$dir/run.json" "$mode" "$name" <<'PY'
import json, sys
m, mode, name = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
r = m["ranks"][0]
held = r["peak_allocated_mb"] - r["peak_activation_mb"]
share = r["tp_s"] / m["measured_step_s"] if m.get("tp", 1) > 1 else 0
print(f"| {mode} | {name} | {m['measured_step_s']:.3f} | {m['tokens_per_s']:.0f} | {held:.1f} | "
      f"{r['tp_all_reduces']} | {100 * share:.1f}% |")
PY
    done
  done
  rm -rf "$dir"
}

# `ppstage plan` against real runs (scripts/plan_check.py): gpt-small-like (SGD) and two
# models we did not write at 2 ranks, each planned under mpirun, its top 5 and 5 others
# (the default among them) trained in PPSTAGE_BENCH_ROUNDS (3) alternating rounds; then a
# memory budget that excludes GPipe and high micro-batch counts; then the planner alone on
# 64 ranks and 256 micro-batches from a saved cost profile (a 124-block gpt: 128 units).
bench_plan() {
  local rounds=${PPSTAGE_BENCH_ROUNDS:-3} dir
  dir=$(mktemp -d)
  echo "### gpt-small-like, SGD, batch 16 x 128"
  scripts/plan_check.py "$ppstage" 2 "$rounds" 10 --config configs/gpt-small.ini \
    --train.optimizer sgd
  echo "### torchvision MobileNetV2 (tests/fixtures/real), batch 64 of 3 x 32 x 32"
  scripts/plan_check.py "$ppstage" 2 "$rounds" 10 --model.name tests/fixtures/real/mobilenet_v2.pt \
    --model.input_dtype float32 --model.input_shape 64,3,32,32 --train.batch_size 64 \
    --data.path synthetic --train.optimizer sgd --train.lr 0.01
  echo "### nn.Transformer (tests/fixtures/real), batch 64 x 16 tokens"
  scripts/plan_check.py "$ppstage" 2 "$rounds" 10 --model.name tests/fixtures/real/transformer.pt \
    --model.vocab_size 64 --model.seq_len 16 --train.batch_size 64 --data.path synthetic \
    --train.optimizer sgd --train.lr 0.01
  echo "### gpt-small-like under a memory budget of 100 MB"
  scripts/plan_check.py "$ppstage" 2 1 10 --config configs/gpt-small.ini --train.optimizer sgd \
    --plan.memory_mb 100
  echo "### 64 ranks, 256 micro-batches, from a saved profile"
  "$ppstage" plan --model.layers 124 --model.d_model 16 --model.heads 2 --model.seq_len 16 \
    --train.batch_size 256 --plan.ranks 64 --plan.save_costs "$dir/costs.json" > /dev/null
  /usr/bin/time -f "planned in %e s wall, %M KB peak RSS" \
    "$ppstage" plan --plan.costs "$dir/costs.json" --plan.ranks 64 | head -3
  rm -rf "$dir"
}

bench_peers() {
  local steps=${PPSTAGE_BENCH_STEPS:-8} rounds=${PPSTAGE_BENCH_ROUNDS:-2}
  local dir=/tmp/ppstage_bench_peers
  mkdir -p "$dir"
  rm -f "$dir"/r*
  scripts/python scripts/peers/gpt.py --save "$dir/gpt_small.pt" > /dev/null
  local base=(--model.name "$dir/gpt_small.pt" --model.seq_len 128 --model.vocab_size 256
              --data.path synthetic --train.batch_size 16 --train.seed 0 --train.optimizer sgd
              --train.lr 0.01 --train.grad_clip 0 --train.steps "$steps" --train.threads 1
              --output.log_every 0 --pipeline.microbatches 8)
  local round mode schedule
  for round in $(seq 1 "$rounds"); do
    scripts/python scripts/peers/pipelining_gloo.py --steps "$steps" > "$dir/r${round}_torch.jsonl"
    for mode in none stage block; do
      for schedule in gpipe 1f1b interleaved-1f1b zb-h1 zb-v; do
        local layout=(--pipeline.stages 2 --pipeline.split_points layers.4)
        [[ $schedule == interleaved-1f1b ]] && layout=(--pipeline.stages 4)
        [[ $schedule == zb-v ]] && layout=(--pipeline.stages 4 --pipeline.placement v)
        mpirun --allow-run-as-root --oversubscribe -np 2 "$ppstage" train "${base[@]}" \
          "${layout[@]}" --pipeline.schedule "$schedule" --compile.mode "$mode" \
          --output.metrics_json "$dir/r${round}_${schedule}_$mode.json" > /dev/null
      done
    done
    scripts/python scripts/peers/compile_inductor.py > "$dir/r${round}_inductor.jsonl"
  done
  scripts/python scripts/peers/peers_table.py "$dir"
}

# One binary's figures for bench_libtorch: gpt-small in one process, at pp 2 with 1F1B and
# ZB-V, and compare-compile; $1 the ppstage binary, $2 the file prefix.
libtorch_runs() {
  local bin=$1 out=$2 steps=${PPSTAGE_BENCH_STEPS:-12}
  local base=(--config configs/gpt-small.ini --train.steps "$steps" --train.threads 1
              --output.log_every 0)
  "$bin" train "${base[@]}" --pipeline.stages 1 --pipeline.microbatches 1 \
    --output.metrics_json "${out}_one.json" > /dev/null
  mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" train "${base[@]}" --pipeline.stages 2 \
    --pipeline.schedule 1f1b --pipeline.microbatches 8 --output.metrics_json "${out}_1f1b.json" \
    > /dev/null
  mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" train "${base[@]}" --pipeline.stages 4 \
    --pipeline.placement v --pipeline.schedule zb-v --pipeline.microbatches 8 \
    --output.metrics_json "${out}_zbv.json" > /dev/null
  mpirun --allow-run-as-root --oversubscribe -np 2 "$bin" compare-compile --config configs/gpt-small.ini \
    --train.steps "$steps" --train.threads 1 --json > "${out}_compile.json"
}

bench_libtorch() {
  local old=${PPSTAGE_BENCH_OLD:?PPSTAGE_BENCH_OLD: the build directory of ppstage on LibTorch 1.13}
  local rounds=${PPSTAGE_BENCH_ROUNDS:-3} dir=/tmp/ppstage_bench_libtorch round
  mkdir -p "$dir"
  # PPSTAGE_BENCH_REPORT_ONLY=1: the table again from the last runs' files.
  if [[ -z ${PPSTAGE_BENCH_REPORT_ONLY:-} ]]; then
    rm -f "$dir"/r*
    for round in $(seq 1 "$rounds"); do
      libtorch_runs "$old/src/ppstage" "$dir/r${round}_old"
      libtorch_runs "$ppstage" "$dir/r${round}_new"
    done
  fi
  python3 - "$dir" "$rounds" <<'PY'
import json, statistics, sys
dir, rounds = sys.argv[1], int(sys.argv[2])
med = statistics.median
load = lambda r, side, name: json.load(open(f"{dir}/r{r}_{side}_{name}.json"))
steady = lambda m: med(m["step_time_s"][1:])
peak = lambda m: max(r["peak_rss_mb"] for r in m["ranks"])
rows = [("gpt-small, one process: step s", lambda r, s: steady(load(r, s, "one"))),
        ("gpt-small, one process: peak RSS MB", lambda r, s: peak(load(r, s, "one"))),
        ("pp 2, 1F1B (M 8): step s", lambda r, s: steady(load(r, s, "1f1b"))),
        ("pp 2, 1F1B (M 8): peak RSS MB (the larger rank)", lambda r, s: peak(load(r, s, "1f1b"))),
        ("pp 2, ZB-V (4 stages, V): step s", lambda r, s: steady(load(r, s, "zbv")))]
for mode in ("none", "stage", "block"):
    pick = lambda r, s, mode=mode: next(m for m in load(r, s, "compile")["modes"] if m["mode"] == mode)
    rows.append((f"compare-compile {mode}: compile time s", lambda r, s, p=pick: p(r, s)["compile_time_s"]))
    rows.append((f"compare-compile {mode}: step s", lambda r, s, p=pick: p(r, s)["step_time_s"]))
    rows.append((f"compare-compile {mode}: fusion groups", lambda r, s, p=pick: p(r, s)["fusion_groups"]))
print(f"{rounds} rounds, each running both in turn; medians over the rounds, and the median "
      "of the rounds' ratios")
print()
print("| run | LibTorch 1.13 | LibTorch 2.11 | 2.11 / 1.13 |")
print("|---|---|---|---|")
for name, get in rows:
    old = [get(r, "old") for r in range(1, rounds + 1)]
    new = [get(r, "new") for r in range(1, rounds + 1)]
    ratios = [n / o for n, o in zip(new, old) if o]
    ratio = "%.2f" % med(ratios) if ratios else "n/a"
    print(f"| {name} | {med(old):.3f} | {med(new):.3f} | {ratio} |")
same = all(load(r, "old", "compile")["modes"][i]["final_loss"] ==
           load(r, "new", "compile")["modes"][i]["final_loss"]
           for r in range(1, rounds + 1) for i in range(3))
print()
print("compare-compile's final losses, 1.13 against 2.11: " + ("bitwise equal in every mode and round" if same else "differ"))
PY
}

case "$what" in
  peers) bench_peers ;;
  libtorch) bench_libtorch ;;
  plan) bench_plan ;;
  split) bench_split ;;
  tp) bench_tp ;;
  seqlen) bench_seqlen ;;
  precision) bench_precision ;;
  data) bench_data ;;
  comm) bench_comm ;;
  train) bench_train ;;
  compile) bench_compile ;;
  checkpoint) bench_checkpoint ;;
  memory) bench_memory ;;
  trace) bench_trace ;;
  recompute) bench_recompute ;;
  plan_budget) bench_plan_budget ;;
  plan_shard) bench_plan_shard ;;
  hosts) bench_hosts ;;
  schedules) bench_schedules ;;
  balance) bench_balance ;;
  sha256) bench_sha256 ;;
  *) echo "usage: scripts/bench.sh peers|libtorch|plan|plan_budget|plan_shard|hosts|recompute|split|tp|seqlen|data|precision|comm|train|compile|checkpoint|memory|trace|schedules|balance|sha256" >&2
     exit 2 ;;
esac
