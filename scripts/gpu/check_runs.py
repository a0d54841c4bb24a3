#!/usr/bin/env python3
"""The GPU check's ppstage runs (scripts/gpu/check.sh runs this after tests/gpu; issue 44
items 10 and 11): the packed ppstage binary under the packed mpirun, on --device.

Checks, each a line "check NAME: pass|FAIL|skip (why)"; gpt-small in fp32, 4 micro-batches,
6 steps (few: AdamW grows the fused kernels' rounding differences step by step):
  one            one stage on one rank: the reference
  one_nccl       the same with --comm.backend nccl (a one-rank NCCL communicator for the
                 pipeline and its splits for the tied weights): losses within 1e-5 relative
                 of `one` (skipped on the CPU, which NCCL does not serve)
  four_<mode>    four stages on one rank (GPipe; the local path between them) in compile mode
                 none, stage and block: losses within 1e-5 relative of `one`; on a GPU,
                 stage and block report fusion groups > 0
  two_mpi        two ranks sharing the device over host-staged MPI (--comm.backend mpi,
                 1F1B): losses within 1e-5 relative of `one`
  timing         `one`'s measured step (wall) within 5% of its predicted step, which is built
                 from the actions' device times (CUDA events on a GPU); on the CPU the ratio
                 is reported, not asserted (host clocks under the machine's other load)
  compare_compile  `ppstage compare-compile` of gpt-small on two ranks sharing the device
                 (host-staged MPI): a row per mode, and on a GPU fusion groups > 0 in stage
                 and block (the rows go to runs.json)
Then, unless --no-mfu, the MFU table (item 11): a GPT of about 350M parameters (24 x d1024,
seq 1024, vocab 50304, bf16, batch 8) trained by ppstage in compile modes none, stage and
block, and by PyTorch eager and torch.compile (scripts/gpu/mfu_peer.py); MFU is model FLOPs
per second (mfu_peer.flops_per_token) over --peak_tflops. --rehearsal shrinks the model.

Every command runs in a session of its own, killed whole (mpirun and its ranks) when it
overruns its time or the --budget_s left; a check whose command cannot start in time fails.
Writes runs.log (every command and its output), runs.json (the checks and the table's rows,
after every check) and mfu.md (the table) to --out; ends with "runs: N passed, N failed,
N skipped".
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mfu_peer  # noqa: E402
from mfu_peer import gpt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOSS_RTOL = 1e-5
TIMING_TOLERANCE = 0.05
MFU_MODEL = {"layers": 24, "d_model": 1024, "heads": 16, "seq_len": 1024, "vocab_size": 50304}
REHEARSAL_MODEL = {"layers": 2, "d_model": 64, "heads": 4, "seq_len": 64, "vocab_size": 512}


class Runner:
    def __init__(self, args):
        self.args = args
        self.deadline = time.monotonic() + args.budget_s
        self.log = open(os.path.join(args.out, "runs.log"), "w")
        self.checks = []
        self.table = None
        self.compare = None  # compare-compile's rows

    def save(self):
        """runs.json (and mfu.md) as they stand: written after every check, so that what ran
        before a timeout is kept."""
        with open(os.path.join(self.args.out, "runs.json"), "w") as f:
            json.dump({"checks": self.checks, "compare_compile": self.compare,
                       "mfu": self.table}, f, indent=2)
        if self.table:
            write_table(self.table, os.path.join(self.args.out, "mfu.md"),
                        self.args.device_name or self.args.device)

    def run(self, name, command, timeout, stdout=None):
        """Runs `command` (its output to `stdout`, else the log) within `timeout` and the
        budget left; returns (exit status, seconds): 124 when time ran out."""
        self.log.write(f"\n### {name}: {' '.join(command)}\n")
        self.log.flush()
        timeout = min(timeout, self.deadline - time.monotonic())
        start = time.perf_counter()
        status = 124
        if timeout > 1:
            child = subprocess.Popen(command, stdout=stdout or self.log, stderr=self.log,
                                     cwd=ROOT, start_new_session=True)
            try:
                status = child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                for sig in (signal.SIGTERM, signal.SIGKILL):  # mpirun, then whatever is left
                    try:
                        os.killpg(child.pid, sig)
                        child.wait(timeout=10)
                        break
                    except (ProcessLookupError, subprocess.TimeoutExpired):
                        continue
        seconds = time.perf_counter() - start
        self.log.write(f"### {name}: exit {status} in {seconds:.1f} s\n")
        self.log.flush()
        return status, seconds

    def run_captured(self, name, command, timeout):
        """run() with the command's standard output kept (and logged): (status, seconds,
        text)."""
        path = os.path.join(self.args.out, f"{name}.stdout")
        with open(path, "w") as sink:
            status, seconds = self.run(name, command, timeout, stdout=sink)
        with open(path) as f:
            text = f.read()
        os.remove(path)  # the check writes at most 8 files; the log keeps the text
        self.log.write(text)
        return status, seconds, text

    def mpirun(self, ranks):
        return [self.args.mpirun, "-q", "--allow-run-as-root", "--oversubscribe", "-np",
                str(ranks), "-x", "LD_LIBRARY_PATH", "-x", "CUBLAS_WORKSPACE_CONFIG"]

    def ppstage(self, name, ranks, flags, timeout=120):
        """One `ppstage train` under mpirun; returns its metrics (None when it failed). Its
        intra-op threads (the CPU's share of the work: capture, checks) are the machine's
        cores divided by the ranks unless `flags` say otherwise."""
        metrics = os.path.join(self.args.out, f"{name}.metrics.json")
        command = self.mpirun(ranks) + [self.args.ppstage, "train", "--train.device",
                                        self.args.device, "--output.metrics_json", metrics]
        status, seconds = self.run(name, command + flags, timeout)
        if status != 0 or not os.path.exists(metrics):
            return None
        with open(metrics) as f:
            result = json.load(f)
        os.remove(metrics)  # the check writes at most 8 files; runs.json keeps what matters
        result["process_s"] = seconds
        return result

    def check(self, name, passed, why):
        """Records a check: `passed` True, False, or None for one skipped."""
        self.checks.append({"name": name, "passed": passed, "why": why})
        word = {True: "pass", False: "FAIL", None: "skip"}[passed]
        print(f"check {name}: {word} ({why})", flush=True)
        self.save()


def worst_relative_difference(a, b):
    if len(a) != len(b) or not a:
        return float("inf")
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


def compare_losses(runner, name, metrics, reference, extra=None):
    if metrics is None:
        runner.check(name, False, "the run failed: see runs.log")
        return
    worst = worst_relative_difference(metrics["losses"], reference["losses"])
    passed = worst <= LOSS_RTOL
    why = f"losses within {worst:.2e} relative of one stage over {len(metrics['losses'])} steps"
    if extra:
        extra_passed, extra_why = extra(metrics)
        passed, why = passed and extra_passed, f"{why}; {extra_why}"
    runner.check(name, passed, why)


def pipeline_checks(runner, args):
    # One rank alone needs no NCCL: host-staged MPI unless the check is NCCL's.
    common = ["--config", "configs/gpt-small.ini", "--train.steps", "6", "--train.threads", "1",
              "--pipeline.microbatches", "4", "--output.log_every", "5"]
    mpi = ["--comm.backend", "mpi"]
    one = runner.ppstage("one", 1, common + mpi + ["--pipeline.stages", "1"])
    if one is None:
        runner.check("one", False, "the reference run failed: see runs.log")
        return
    runner.check("one", True, f"{len(one['losses'])} steps, final loss {one['final_loss']:.4f}")
    if args.device == "cpu":
        runner.check("one_nccl", None, "NCCL carries no CPU tensors")
    else:
        nccl = runner.ppstage("one_nccl", 1, common + ["--comm.backend", "nccl",
                                                       "--pipeline.stages", "1"])
        compare_losses(runner, "one_nccl", nccl, one)
    for mode in ("none", "stage", "block"):
        def fusion(metrics, mode=mode):
            groups = metrics["compile"].get("fusion_groups", 0)
            if mode == "none" or args.device == "cpu":  # TorchScript fuses nothing on the CPU
                return True, f"{groups} fusion groups"
            return groups > 0, f"{groups} fusion groups (> 0 expected)"
        four = runner.ppstage(f"four_{mode}", 1,
                              common + mpi + ["--pipeline.stages", "4", "--pipeline.schedule",
                                              "gpipe", "--compile.mode", mode])
        compare_losses(runner, f"four_{mode}", four, one, fusion)
    two = runner.ppstage("two_mpi", 2, common + mpi)
    compare_losses(runner, "two_mpi", two, one)
    ratio = one["measured_step_s"] / one["predicted_step_s"] if one["predicted_step_s"] else 0
    why = (f"measured {one['measured_step_s'] * 1e3:.2f} ms per step, predicted from device "
           f"times {one['predicted_step_s'] * 1e3:.2f} ms: ratio {ratio:.3f}")
    if args.device == "cpu":  # host clocks, under whatever else the machine runs: no assert
        runner.check("timing", None, f"{why}; asserted on a GPU only")
    else:
        runner.check("timing", abs(ratio - 1) <= TIMING_TOLERANCE, why)


def compare_compile(runner, args):
    command = runner.mpirun(2) + [
        args.ppstage, "compare-compile", "--config", "configs/gpt-small.ini", "--train.steps",
        "6" if args.rehearsal else "12", "--train.threads", "1", "--train.device", args.device,
        "--comm.backend", "mpi", "--json"]
    status, _, text = runner.run_captured("compare_compile", command, 150)
    try:
        rows = json.loads(text[text.index("{"):])["modes"] if status == 0 else []
    except ValueError:
        rows = []
    runner.compare = rows
    modes = {row["mode"]: row for row in rows}
    if sorted(modes) != ["block", "none", "stage"]:
        runner.check("compare_compile", False,
                     f"exit {status}, modes {sorted(modes)}: see runs.log")
        return
    fused = all(modes[m]["fusion_groups"] > 0 for m in ("stage", "block"))
    summary = "; ".join(
        f"{m}: {row['fusion_groups']} fusion groups, compile {row['compile_time_s']:.2f} s, "
        f"step {row['step_time_s'] * 1e3:.1f} ms, loss diff {row['loss_max_rel_diff']:.1e}"
        for m, row in ((m, modes[m]) for m in ("none", "stage", "block")))
    runner.check("compare_compile", fused or args.device == "cpu", summary)


def inductor_missing():
    """Why torch.compile cannot build kernels here (Triton compiles a C launcher against
    Python's headers), or None."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        return "no C compiler (cc, gcc) for Triton"
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        return "no Python.h for Triton"
    return None


def mfu_rows(runner, args):
    """The MFU table's rows, into runner.table as each run ends."""
    model = REHEARSAL_MODEL if args.rehearsal else MFU_MODEL
    batch, steps, warmup = (4, 6, 2) if args.rehearsal else (8, 15, 5)
    config = gpt.GPTConfig(**model)
    flops = mfu_peer.flops_per_token(config)
    peak = args.peak_tflops * 1e12
    rows = []
    runner.table = {"model": model, "batch_size": batch, "steps": steps, "warmup": warmup,
                    "params": count_parameters(config), "flops_per_token": flops,
                    "peak_tflops": args.peak_tflops, "rows": rows}

    def row(way, step_s, first_step_s, process_s, losses):
        tokens_per_s = batch * config.seq_len / step_s
        rows.append({"way": way, "step_s": step_s, "tokens_per_s": tokens_per_s,
                     "mfu": tokens_per_s * flops / peak, "first_step_s": first_step_s,
                     "process_s": process_s, "first_loss": losses[0], "last_loss": losses[-1]})

    flags = ["--model.name", "gpt", "--train.batch_size", str(batch), "--train.steps", str(steps),
             "--pipeline.stages", "1", "--pipeline.microbatches", "1", "--train.precision", "bf16",
             "--train.optimizer", "adamw", "--train.lr", "1e-4", "--train.grad_clip", "0",
             "--comm.backend", "mpi", "--output.log_every", "5"]
    for key, value in model.items():
        flags += [f"--model.{key}", str(value)]
    for mode in ("none", "stage", "block"):
        metrics = runner.ppstage(f"mfu_{mode}", 1, flags + ["--compile.mode", mode], timeout=150)
        if metrics is None:
            runner.check(f"mfu_{mode}", False, "the run failed: see runs.log")
            continue
        times = metrics["step_time_s"]
        row(f"ppstage {mode}", statistics.median(times[warmup:]), times[0],
            metrics["process_s"], metrics["losses"])
        runner.check(f"mfu_{mode}", True, f"{len(times)} steps")
    peer_flags = [f"--{k}={v}" for k, v in model.items()]
    peer_flags += [f"--batch_size={batch}", f"--steps={steps}", f"--warmup={warmup}",
                   f"--device={args.device}"]
    for way in args.peer_ways.split(","):
        missing = inductor_missing() if way == "compile" else None
        if missing:
            runner.check(f"peer_{way}", None, missing)
            continue
        command = [args.python, os.path.join(ROOT, "scripts", "gpu", "mfu_peer.py"), "--way", way]
        status, process_s, text = runner.run_captured(f"peer_{way}", command + peer_flags, 240)
        if status != 0:
            runner.check(f"peer_{way}", False, f"exit {status}: see runs.log")
            continue
        peer = json.loads(text)
        row(f"PyTorch {way}", peer["step_s"], peer["first_step_s"], process_s, peer["losses"])
        runner.check(f"peer_{way}", True, f"{len(peer['losses'])} steps")


def count_parameters(config):
    """The peer's module built on the meta device: shapes only, nothing allocated."""
    with torch.device("meta"):
        return gpt.count_parameters(gpt.GPT(config))


def write_table(table, path, device):
    with open(path, "w") as f:
        model = table["model"]
        f.write(f"Device: {device}. GPT {model['layers']} x d{model['d_model']}, "
                f"{model['heads']} heads, seq {model['seq_len']}, vocab {model['vocab_size']}: "
                f"{table['params'] / 1e6:.1f}M parameters, "
                f"{table['flops_per_token'] / 1e9:.2f} GFLOP per token; bf16, batch "
                f"{table['batch_size']}, {table['steps']} steps (median after "
                f"{table['warmup']}), peak {table['peak_tflops']:g} TFLOP/s.\n\n")
        f.write("| run | step (ms) | tokens/s | MFU | first step (s) | process (s) | loss |\n")
        f.write("|---|---:|---:|---:|---:|---:|---|\n")
        for r in table["rows"]:
            f.write(f"| {r['way']} | {r['step_s'] * 1e3:.1f} | {r['tokens_per_s']:,.0f} | "
                    f"{r['mfu'] * 100:.1f}% | {r['first_step_s']:.2f} | {r['process_s']:.1f} | "
                    f"{r['first_loss']:.3f} → {r['last_loss']:.3f} |\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ppstage", required=True)
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget_s", type=float, default=260,
                        help="seconds for all the runs; a run past them is cut short")
    parser.add_argument("--rehearsal", action="store_true", help="a tiny MFU model")
    parser.add_argument("--no-mfu", action="store_true")
    parser.add_argument("--peak_tflops", type=float, default=790.0,
                        help="the device's dense bf16 peak (issue 44 names 790 for the H200)")
    parser.add_argument("--device_name", default="", help="for the table's header")
    parser.add_argument("--peer_ways", default="eager,compile",
                        help="the peer's ways (mfu_peer.py --way), comma-separated")
    args = parser.parse_args()
    runner = Runner(args)
    pipeline_checks(runner, args)
    compare_compile(runner, args)
    if not args.no_mfu:
        mfu_rows(runner, args)
        runner.save()
        with open(os.path.join(args.out, "mfu.md")) as f:
            print(f.read(), end="")
    failed = sum(1 for c in runner.checks if c["passed"] is False)
    skipped = sum(1 for c in runner.checks if c["passed"] is None)
    print(f"runs: {len(runner.checks) - failed - skipped} passed, {failed} failed, "
          f"{skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
