#!/usr/bin/env python3
"""The planner's choice of a sharded optimizer against real runs (docs/benchmarks.md, "The
planner chooses a sharded optimizer"): plans MODEL under mpirun on RANKS ranks (the units
measured on all of them at once) for each BUDGET (MB per rank; "none": no budget), writes
the chosen configuration (--write-config) and trains it, and the same configuration with
--train.shard_optimizer flipped, in ROUNDS alternating rounds of STEPS steps. Prints one
markdown row per budget: the choice, its predicted and measured peak (the largest rank's
peak_allocated_mb, the largest over rounds), the predicted step and the measured one (the
median over rounds of each run's measured_step_s), the largest rank's optimizer_state_mb +
master_weights_mb, and the same measured with the choice flipped.

usage: plan_shard_check.py PPSTAGE RANKS ROUNDS STEPS BUDGET[,BUDGET...] -- MODEL OPTIONS...
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def mpi(ranks):
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-q", "-np", str(ranks)]


def measured(ppstage, ranks, config, extra, steps, out):
    subprocess.run(mpi(ranks) + [ppstage, "train", "--config", config, "--train.steps", str(steps),
                                 "--train.threads", "1", "--output.log_every", "0",
                                 "--output.metrics_json", out] + extra,
                   check=True, stdout=subprocess.DEVNULL)
    m = json.load(open(out))
    state = max(r["optimizer_state_mb"] + r["master_weights_mb"] for r in m["ranks"])
    return max(r["peak_allocated_mb"] for r in m["ranks"]), m["measured_step_s"], state


def label_of(chosen):
    rc = chosen["recompute"]
    per_rank = chosen["stages_per_rank"]
    return (f"{chosen['schedule']} dp{chosen['dp']} pp{chosen['pp']}"
            f"{'x' + str(per_rank) if per_rank > 1 else ''} M{chosen['microbatches']}"
            f"{' ' + rc['policy'] + ' ' + ','.join(map(str, rc['blocks'])) if 'blocks' in rc else ''}"
            f"{' shard_optimizer' if chosen['shard_optimizer'] else ''}")


def main():
    ppstage, ranks, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    budgets = sys.argv[5]
    model = sys.argv[sys.argv.index("--") + 1:]
    work = tempfile.mkdtemp(prefix="ppstage_plan_shard_")
    costs = os.path.join(work, "costs.json")
    subprocess.run(mpi(ranks) + [ppstage, "plan"] + model + ["--plan.save_costs", costs, "--json"],
                   check=True, stdout=subprocess.DEVNULL)
    print("| budget MB | chosen | predicted peak MB | measured peak MB | measured / predicted "
          "| predicted step s | measured step s | state + masters MB | flipped: peak MB "
          "| step s | state + masters MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for budget in budgets.split(","):
        config = os.path.join(work, f"plan_{budget}.ini")
        plan_json = os.path.join(work, f"plan_{budget}.json")
        limit = [] if budget == "none" else ["--plan.memory_mb", budget]
        with open(plan_json, "w") as out:
            subprocess.run(mpi(ranks) + [ppstage, "plan"] + model +
                           ["--plan.costs", costs, "--json", "--write-config", config] + limit,
                           check=True, stdout=out)
        chosen = json.load(open(plan_json))["chosen"]
        flipped = ["--train.shard_optimizer", "false" if chosen["shard_optimizer"] else "true"]
        runs = {"chosen": [], "flipped": []}
        for r in range(rounds):
            order = ["chosen", "flipped"] if r % 2 == 0 else ["flipped", "chosen"]
            for which in order:
                extra = [] if which == "chosen" else flipped
                runs[which].append(measured(ppstage, ranks, config, extra, steps,
                                            os.path.join(work, f"m_{budget}_{which}_{r}.json")))
        row = {}
        for which, results in runs.items():
            row[which] = (max(p for p, _, _ in results), statistics.median(s for _, s, _ in results),
                          max(m for _, _, m in results))
        peak, step, state = row["chosen"]
        f_peak, f_step, f_state = row["flipped"]
        print(f"| {budget} | {label_of(chosen)} | {chosen['peak_memory_mb']:.1f} | {peak:.1f} | "
              f"{peak / chosen['peak_memory_mb']:.3f} | {chosen['predicted_step_s']:.3f} | "
              f"{step:.3f} | {state:.1f} | {f_peak:.1f} | {f_step:.3f} | {f_state:.1f} |")


if __name__ == "__main__":
    main()
