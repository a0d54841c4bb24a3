#!/usr/bin/env python3
"""The planner under a memory budget that only recomputation meets well, against real runs
(docs/benchmarks.md, "The planner chooses recomputation"): plans MODEL under mpirun on 2
ranks (the units measured on both at once) with --plan.memory_mb BUDGET for each budget,
writes the chosen configuration (--write-config) and trains it, and the same configuration
with every block recomputed (--train.recompute full --train.recompute_blocks ''), in
ROUNDS alternating rounds of STEPS steps. Prints one markdown row per budget: the choice,
its predicted and measured peak (the larger rank's peak_allocated_mb, the largest over
rounds), the predicted step and the measured one (the median over rounds of each run's
measured_step_s), and the same two measured for everything recomputed.

usage: plan_budget_check.py PPSTAGE ROUNDS STEPS BUDGET[,BUDGET...] -- MODEL OPTIONS...
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-q", "-np", "2"]


def run(args):
    subprocess.run(MPI + args, check=True, stdout=subprocess.DEVNULL)


def measured(ppstage, config, extra, steps, out):
    run([ppstage, "train", "--config", config, "--train.steps", str(steps), "--train.threads",
         "1", "--output.log_every", "0", "--output.metrics_json", out] + extra)
    m = json.load(open(out))
    return max(r["peak_allocated_mb"] for r in m["ranks"]), m["measured_step_s"]


def main():
    ppstage, rounds, steps, budgets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    model = sys.argv[sys.argv.index("--") + 1:]
    work = tempfile.mkdtemp(prefix="ppstage_plan_budget_")
    costs = os.path.join(work, "costs.json")
    run([ppstage, "plan"] + model + ["--plan.save_costs", costs, "--json"])
    print("| budget MB | chosen | predicted peak MB | measured peak MB | measured / predicted "
          "| predicted step s | measured step s | every block recomputed: step s | peak MB "
          "| speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for budget in budgets.split(","):
        config = os.path.join(work, f"plan_{budget}.ini")
        plan_json = os.path.join(work, f"plan_{budget}.json")
        with open(plan_json, "w") as out:
            subprocess.run(MPI + [ppstage, "plan"] + model +
                           ["--plan.costs", costs, "--plan.memory_mb", budget, "--json",
                            "--write-config", config], check=True, stdout=out)
        chosen = json.load(open(plan_json))["chosen"]
        rc = chosen["recompute"]
        label = (f"{chosen['schedule']} dp{chosen['dp']} pp{chosen['pp']}"
                 f"{'x' + str(chosen['stages_per_rank']) if chosen['stages_per_rank'] > 1 else ''}"
                 f" M{chosen['microbatches']} {rc['policy']}"
                 f"{' ' + ','.join(map(str, rc['blocks'])) if 'blocks' in rc else ''}")
        runs = {"chosen": [], "all": []}
        for r in range(rounds):
            order = ["chosen", "all"] if r % 2 == 0 else ["all", "chosen"]
            for which in order:
                extra = [] if which == "chosen" else ["--train.recompute", "full",
                                                      "--train.recompute_blocks", ""]
                runs[which].append(measured(ppstage, config, extra, steps,
                                            os.path.join(work, f"m_{budget}_{which}_{r}.json")))
        peak = max(p for p, _ in runs["chosen"])
        step = statistics.median(s for _, s in runs["chosen"])
        all_peak = max(p for p, _ in runs["all"])
        all_step = statistics.median(s for _, s in runs["all"])
        print(f"| {budget} | {label} | {chosen['peak_memory_mb']:.1f} | {peak:.1f} | "
              f"{peak / chosen['peak_memory_mb']:.3f} | {chosen['predicted_step_s']:.3f} | "
              f"{step:.3f} | {all_step:.3f} | {all_peak:.1f} | {all_step / step:.2f}x |")


if __name__ == "__main__":
    main()
