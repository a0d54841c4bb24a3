#!/usr/bin/env python3
"""The tables of `scripts/bench.sh peers` (docs/benchmarks.md), from the files it wrote:

  r<N>_torch.jsonl         pipelining_gloo.py's line per schedule, round N
  r<N>_<schedule>_<mode>.json  ppstage train's metrics, round N
  r<N>_inductor.jsonl      compile_inductor.py's line per way, round N

Steps are medians over rounds of each run's steady step (the median after its first); the
ratios are each round's ratio to torch's Schedule1F1B in the same round, then the median, so
that the machine's drift between rounds cancels.

  scripts/python scripts/peers/peers_table.py DIR
"""
import glob
import json
import os
import statistics
import sys

def med(values):
    """The median, or None for no values (a run that failed in every round)."""
    values = list(values)
    return statistics.median(values) if values else None


def ratio_text(value):
    return "n/a" if value is None else f"{value:.2f}"

TORCH_ORDER = ["ScheduleGPipe", "Schedule1F1B", "ScheduleInterleaved1F1B",
               "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble", "ScheduleDualPipeV"]
PPSTAGE_ORDER = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v"]
MODES = ["none", "stage", "block"]


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steady_ms(metrics):
    times = metrics["step_time_s"]
    return 1000 * med(times[1:] if len(times) > 1 else times)


def main(dir):
    rounds = sorted({os.path.basename(p).split("_")[0] for p in glob.glob(f"{dir}/r*_torch.jsonl")})
    torch_runs = {r: {x["schedule"]: x for x in jsonl(f"{dir}/{r}_torch.jsonl")} for r in rounds}
    anchor = {r: torch_runs[r].get("Schedule1F1B", {}).get("ms_per_step") for r in rounds}
    print(f"{len(rounds)} rounds; ratio: torch Schedule1F1B's step / the row's step in the same "
          "round (above 1: faster than torch's 1F1B), median over rounds")
    print()
    print("| runtime | schedule | compile | stages per rank | ms per step | speed vs torch 1F1B |")
    print("|---|---|---|---|---|---|")
    for name in TORCH_ORDER:
        runs = [torch_runs[r].get(name) for r in rounds]
        if not all(run and run["ok"] for run in runs):
            error = next((run["error"] for run in runs if run and not run["ok"]), "not run")
            print(f"| torch.distributed.pipelining | {name} | eager | | failed: {error} | |")
            continue
        ms = med(run["ms_per_step"] for run in runs)
        ratio = med(anchor[r] / run["ms_per_step"] for r, run in zip(rounds, runs) if anchor[r])
        print(f"| torch.distributed.pipelining | {name} | eager | {runs[0]['stages_per_rank']} "
              f"| {ms:.0f} | {ratio_text(ratio)} |")
    for mode in MODES:
        for schedule in PPSTAGE_ORDER:
            paths = [f"{dir}/{r}_{schedule}_{mode}.json" for r in rounds]
            if not all(os.path.exists(p) for p in paths):
                continue
            metrics = [json.load(open(p)) for p in paths]
            ms = [steady_ms(m) for m in metrics]
            ratio = med(anchor[r] / x for r, x in zip(rounds, ms) if anchor[r])
            per_rank = len(metrics[0]["ranks"][0]["stages"])
            print(f"| ppstage | {schedule} | {mode} | {per_rank} | {med(ms):.0f} | "
                  f"{ratio_text(ratio)} |")
    inductor_paths = [f"{dir}/{r}_inductor.jsonl" for r in rounds]
    if not all(os.path.exists(p) for p in inductor_paths):
        return
    print()
    print("Stage 1 of the two (layers 4-7, ln_f, the head and the loss), one micro-batch of "
          "2 x 128: forward + backward")
    print()
    print("| runtime | compile | compile s | first step s | steady ms | graphs compiled |")
    print("|---|---|---|---|---|---|")
    ways = {}
    for p in inductor_paths:
        for x in jsonl(p):
            ways.setdefault(x["way"], []).append(x)
    labels = {"eager": "eager", "stage": "torch.compile(stage)", "block": "torch.compile(each block)"}
    for way, runs in ways.items():
        if not all(x.get("ok", True) for x in runs):
            print(f"| torch | {labels[way]} | failed: {runs[0].get('error')} | | | |")
            continue
        graphs = runs[0].get("graphs_compiled", "")
        runtime = "torch" if way == "eager" else "torch (inductor)"
        compile_s = med(x["compile_s"] for x in runs if "compile_s" in x)
        compile_text = "" if compile_s is None else f"{compile_s:.2f}"
        print(f"| {runtime} | {labels[way]} | {compile_text} | "
              f"{med(x['first_step_s'] for x in runs):.2f} | "
              f"{med(x['steady_step_ms'] for x in runs):.1f} | {graphs} |")
    for mode in MODES:
        paths = [f"{dir}/{r}_1f1b_{mode}.json" for r in rounds]
        if not all(os.path.exists(p) for p in paths):
            continue
        metrics = [json.load(open(p)) for p in paths]
        # Rank 1 runs stage 1: its mean F and B per micro-batch in the steady steps.
        per_mb = [1000 * (m["ranks"][1]["action_costs_s"]["F"] + m["ranks"][1]["action_costs_s"]["B"])
                  for m in metrics]
        first = [m["step_time_s"][0] for m in metrics]
        # ppstage compiles in its first steps: their time over the steady step (compile_time_s).
        compile_s = [m["compile"]["compile_time_s"] for m in metrics]
        print(f"| ppstage (rank 1 of 1f1b) | {mode} | {med(compile_s):.2f} | "
              f"{med(first):.2f} (the pipelined step) | "
              f"{med(per_mb):.1f} | {metrics[0]['compile']['graphs_compiled']} |")


if __name__ == "__main__":
    main(sys.argv[1])
