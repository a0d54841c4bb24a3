#!/usr/bin/env python3
"""Predicted against measured steps across hosts (docs/benchmarks.md, "Across hosts"): for
each inter-host link setting, 2 hosts made of network namespaces (scripts/hosts_run.sh),
  - `ppstage plan` over 2 hosts of 2 ranks (the links probed inside and between them): the
    chosen configuration and its predicted step, trained (--write-config) and measured;
  - pp 2, one stage per host, and pp 2 x dp 2 in both rank orders (dp-pp-tp: each pipeline
    inside a host, the all-reduces between them; pp-dp-tp: the reverse), each trained
    with --pipeline.balance time, which measures the costs and links in the job and logs
    the step it predicts for its own layout.
Measured is the median step of a run (measured_step_s); beside it, the run's own actions
and messages replayed through the simulator (predicted_step_s of its metrics: what the
prediction would be with the run's costs in place of the profile's). Prints one markdown
row per run; with --passes N, the whole sweep N times over (each pass after the last, so
that a slow spell of the machine falls on one pass, not on one row's every run), then each
row's measured / predicted in every pass and their median.

usage: hosts_bench.py PPSTAGE STEPS SETTING[,SETTING...] [--passes N] -- MODEL OPTIONS...
  SETTING: none | DELAY_MS/RATE, e.g. 1/1gbit: each host's link limited to RATE (tc tbf)
  and delayed DELAY_MS / 2 (tests/integration/link_emulator.c), so a frame between the
  two hosts is delayed DELAY_MS one way.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HOSTS_RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hosts_run.sh")


def link_options(setting):
    if setting == "none":
        return []
    delay_ms, rate = setting.split("/")
    return ["--rate", rate, "--link", f"{float(delay_ms) / 2},0,0"]


def run(setting, hosts, program, args):
    out = subprocess.run(["bash", HOSTS_RUN] + link_options(setting) + [hosts, "--", program] + args,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        sys.exit(f"hosts_bench.py: {setting} {hosts} {' '.join(args[:2])} failed:\n{out.stdout[-3000:]}")
    return out.stdout


def train(ppstage, setting, hosts, args, steps, work):
    metrics = os.path.join(work, "metrics.json")
    log = run(setting, hosts, ppstage,
              ["train"] + args + ["--train.steps", str(steps), "--train.threads", "1",
                                  "--output.log_every", "0", "--output.metrics_json", metrics])
    m = json.load(open(metrics))
    return log, m["measured_step_s"], m["predicted_step_s"]


def row(setting, what, label, predicted, measured, replayed):
    print(f"| {setting} | {what} | {label} | {predicted:.4f} | {measured:.4f} | "
          f"{measured / predicted:.3f} | {replayed:.4f} |", flush=True)
    return measured / predicted


def sweep(ppstage, steps, settings, model, work):
    """One pass: its rows printed; returns {(setting, run): (configuration, ratio)}."""
    ratios = {}
    print("| link between hosts | run | configuration | predicted step s | measured step s | "
          "measured / predicted | the run's own actions replayed, s |")
    print("|---|---|---|---|---|---|---|")
    for setting in settings:
        chosen_ini = os.path.join(work, "chosen.ini")
        out = run(setting, "h0:2,h1:2", ppstage,
                  ["plan"] + model + ["--plan.schedules", "1f1b", "--json", "--train.threads", "1",
                                      "--write-config", chosen_ini])
        try:
            plan = json.loads(out)
        except json.JSONDecodeError:
            sys.exit(f"hosts_bench.py: {setting}: the plan printed more than its JSON:\n{out[-3000:]}")
        links = plan["link_costs"]
        between, inside = links["host_message"], links["message"]
        print(f"<!-- {setting}: probed between hosts {between['latency_s'] * 1e3:.2f} ms, "
              f"{between['bytes_per_s'] / 1e6:.1f} MB/s (all-reduce "
              f"{links['host_all_reduce']['bytes_per_s'] / 1e6:.1f} MB/s); inside "
              f"{inside['latency_s'] * 1e6:.0f} us, {inside['bytes_per_s'] / 1e9:.2f} GB/s -->",
              flush=True)
        chosen = plan["chosen"]
        label = (f"{chosen['schedule']} dp{chosen['dp']} pp{chosen['pp']} "
                 f"M{chosen['microbatches']} {chosen['rank_order']}"
                 f"{' shard_optimizer' if chosen['shard_optimizer'] else ''}")
        _, measured, replayed = train(ppstage, setting, "h0:2,h1:2", ["--config", chosen_ini],
                                      steps, work)
        ratios[(setting, "planner's choice")] = (label, row(
            setting, "planner's choice", label, chosen["predicted_step_s"], measured, replayed))
        for what, hosts, layout in [
                ("pp 2", "h0:1,h1:1", ["--train.dp", "1"]),
                ("pp 2 x dp 2 dp-pp-tp", "h0:2,h1:2", ["--train.dp", "2", "--pipeline.rank_order", "dp-pp-tp"]),
                ("pp 2 x dp 2 pp-dp-tp", "h0:2,h1:2", ["--train.dp", "2", "--pipeline.rank_order", "pp-dp-tp"])]:
            log, measured, replayed = train(ppstage, setting, hosts,
                                  model + layout + ["--pipeline.schedule", "1f1b",
                                                    "--pipeline.balance", "time"], steps, work)
            found = re.search(r"pipeline\.balance time: (.*?) cut at .*?predicted step ([0-9.]+) s", log)
            if not found:
                sys.exit(f"hosts_bench.py: no predicted step in the log:\n{log[-3000:]}")
            ratios[(setting, what)] = (found.group(1), row(
                setting, what, found.group(1), float(found.group(2)), measured, replayed))
    return ratios


def summary(passes):
    """Each row's measured / predicted in every pass, and their median."""
    print()
    print("| link between hosts | run | configurations | measured / predicted, each pass | median |")
    print("|---|---|---|---|---|")
    for setting, what in passes[0]:
        labels = sorted({p[(setting, what)][0] for p in passes})
        ratios = [p[(setting, what)][1] for p in passes]
        print(f"| {setting} | {what} | {'; '.join(labels)} | "
              f"{', '.join(f'{r:.3f}' for r in ratios)} | {statistics.median(ratios):.3f} |",
              flush=True)


def main():
    ppstage, steps = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    settings = sys.argv[3].split(",")
    split = sys.argv.index("--")
    options, model = sys.argv[4:split], sys.argv[split + 1:]
    count = None  # no --passes: one pass, no summary
    if options:
        if len(options) != 2 or options[0] != "--passes" or not options[1].isdigit() \
                or int(options[1]) < 1:
            sys.exit(f"hosts_bench.py: error: expected [--passes N] before --, not {' '.join(options)}")
        count = int(options[1])
    work = tempfile.mkdtemp(prefix="ppstage_hosts_bench_")
    passes = []
    for number in range(count or 1):
        if count:
            print(f"\n#### Pass {number + 1} of {count}\n", flush=True)
        passes.append(sweep(ppstage, steps, settings, model, work))
    if count:
        summary(passes)


if __name__ == "__main__":
    main()
