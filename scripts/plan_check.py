#!/usr/bin/env python3
"""Checks `ppstage plan` against real runs (scripts/bench.sh plan; docs/benchmarks.md).

Plans once (--json, many candidates), then trains the planner's top 5 and 5 others for
real: the default 1F1B configuration (M = 2 x stages, balanced by params) and four spread
over the rest of the ranking. Every configuration runs once per round, in alternating
rounds, and its measured step is the median over rounds of the run's median step. Prints
one markdown row per configuration (predicted, measured, measured / predicted, peak tensor
memory predicted and measured), then whether the first choice is within 5% of the fastest
measured, the Spearman rank correlation of predicted and measured steps, and the chosen
configuration's speed against the default and against two limits: one process's step / P,
and P one-process runs of batch / P side by side (no communication at all: what P ranks on
this machine reach when they share its memory and caches).

usage: plan_check.py PPSTAGE RANKS ROUNDS STEPS [ppstage options for plan and train...]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def plan(ppstage, ranks, options):
    cmd = [ppstage, "plan", "--plan.top", "1000", "--json", "--train.threads", "1"] + options
    if ranks > 1:  # the plan measures the links between the ranks
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def candidate_args(c):
    args = ["--pipeline.schedule", c["schedule"], "--pipeline.stages", str(c["stages"]),
            "--pipeline.microbatches", str(c["microbatches"]),
            "--pipeline.stages_per_rank", str(c["stages_per_rank"]),
            "--pipeline.placement", c["placement"], "--train.dp", str(c["dp"])]
    if c["split_points"]:
        args += ["--pipeline.split_points", ",".join(c["split_points"])]
    return args


def label(c):
    spr = "x%d %s" % (c["stages_per_rank"], c["placement"]) if c["stages_per_rank"] > 1 else ""
    return "%s dp%d pp%d%s M%d" % (c["schedule"], c["dp"], c["pp"], spr, c["microbatches"])


def key(c):
    """A configuration: its label and its cut."""
    return label(c) + " @" + ",".join(c["split_points"])


def with_batch(options, batch):
    """`options` with the batch size `batch` (and a model file's example input shape)."""
    out, i = [], 0
    while i < len(options):
        if options[i] == "--train.batch_size" and i + 1 < len(options):
            i += 2
        elif options[i] == "--model.input_shape" and i + 1 < len(options):
            out += [options[i], ",".join([str(batch)] + options[i + 1].split(",")[1:])]
            i += 2
        else:
            out.append(options[i])
            i += 1
    return out + ["--train.batch_size", str(batch)]


def side_by_side(ppstage, ranks, steps, options, batch):
    """The slowest of `ranks` one-process runs of batch / ranks, started together."""
    with tempfile.TemporaryDirectory() as tmp:
        procs, files = [], []
        for r in range(ranks):
            metrics = os.path.join(tmp, "m%d.json" % r)
            cmd = [ppstage, "train", "--train.steps", str(steps), "--train.threads", "1",
                   "--output.log_every", "0", "--output.metrics_json", metrics,
                   "--pipeline.stages", "1", "--pipeline.microbatches", "1"]
            procs.append(subprocess.Popen(cmd + with_batch(options, batch // ranks),
                                          stdout=subprocess.DEVNULL))
            files.append(metrics)
        for proc in procs:
            if proc.wait() != 0:
                raise RuntimeError("a side-by-side run failed")
        return max(json.load(open(f))["measured_step_s"] for f in files)


def run(ppstage, ranks, steps, options, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as metrics:
        cmd = [ppstage, "train", "--train.steps", str(steps), "--train.threads", "1",
               "--output.log_every", "0", "--output.metrics_json", metrics.name] + options + extra
        if ranks > 1:
            cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        m = json.load(open(metrics.name))
    return m["measured_step_s"], max(r["peak_allocated_mb"] for r in m["ranks"])


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for position, i in enumerate(order):
            r[i] = position
        return r
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1))


def chosen_configurations(p):
    best = p["best"]
    picked = best[:5]
    default = p["default"]
    if default and all(key(c) != key(default) for c in picked):
        picked.append(default)
    rest = [c for c in best[5:] if all(key(c) != key(x) for x in picked)]
    want = 10 - len(picked)
    for k in range(want):
        if rest:
            picked.append(rest[min(len(rest) - 1, k * len(rest) // max(want, 1))])
    return picked


def main():
    ppstage, ranks, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    options = sys.argv[5:]
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    p = plan(ppstage, ranks, options)
    configs = chosen_configurations(p)
    measured = {key(c): [] for c in configs}
    memory = {key(c): 0.0 for c in configs}
    single, beside = [], []
    for _ in range(rounds):
        single.append(run(ppstage, 1, steps, options,
                          ["--pipeline.stages", "1", "--pipeline.microbatches", "1"])[0])
        beside.append(side_by_side(ppstage, ranks, steps, options, p["batch_size"]))
        for c in configs:
            step, peak = run(ppstage, ranks, steps, options, candidate_args(c))
            measured[key(c)].append(step)
            memory[key(c)] = max(memory[key(c)], peak)
    print("plan: %d candidates, %d simulated, measured in %.1f s, planned in %.2f s"
          % (p["candidates"], p["simulated"], p["measure_s"], p["plan_s"]))
    print()
    print("| # | configuration | predicted s | measured s | measured / predicted | "
          "peak MB predicted | peak MB measured |")
    print("|---|---|---|---|---|---|---|")
    steps_measured = []
    for i, c in enumerate(configs):
        m = statistics.median(measured[key(c)])
        steps_measured.append(m)
        rank = str(p["best"].index(c) + 1) if c in p["best"] else "default"
        if p["default"] and key(c) == key(p["default"]):
            rank += " (default)" if rank != "default" else ""
        print("| %s | %s | %.4f | %.4f | %.3f | %.1f | %.1f |"
              % (rank, label(c), c["predicted_step_s"], m, m / c["predicted_step_s"],
                 c["peak_memory_mb"], memory[key(c)]))
    predicted = [c["predicted_step_s"] for c in configs]
    fastest = min(steps_measured)
    first = steps_measured[0]
    one = statistics.median(single)
    print()
    print("first choice %s: %.4f s, fastest measured %.4f s: %.3f of it (goal: within 5%%)"
          % (label(configs[0]), first, fastest, first / fastest))
    print("Spearman rank correlation, predicted against measured: %.2f (goal: at least 0.8)"
          % spearman(predicted, steps_measured))
    print("one process (full batch): %.4f s; limit (its step / %d) %.4f s; first choice reaches "
          "%.3f of the limit" % (one, ranks, one / ranks, (one / ranks) / first))
    two = statistics.median(beside)
    print("%d one-process runs of batch / %d side by side: the slowest %.4f s; first choice "
          "reaches %.3f of it" % (ranks, ranks, two, two / first))
    if p["default"]:
        d = steps_measured[[key(c) for c in configs].index(key(p["default"]))]
        print("default %s: %.4f s; first choice is %.2fx its speed"
              % (label(p["default"]), d, d / first))


if __name__ == "__main__":
    main()
