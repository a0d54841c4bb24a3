#!/usr/bin/env python3
"""torch.compile (inductor, CPU) of a whole pipeline stage against each block compiled alone:
the PyTorch side of ppstage's stage-vs-block comparison (scripts/bench.sh peers).

The stage is the last of gpt-small cut in two (scripts/peers/gpt.py; layers 4-7, ln_f and the
tied head, as ppstage's stage 1 at --pipeline.split_points layers.4), trained on one
micro-batch of 2 x 128 tokens (batch 16 in M = 8) with cross-entropy and SGD, in one process
with one intra-op thread. Three ways, each in a fresh process so that no compiled code is
shared between them:

  eager   no compilation
  stage   torch.compile(stage): one graph for the whole stage
  block   torch.compile(block) for each of the four blocks, the rest eager: identical blocks
          share compiled code where dynamo's cache lets them

For each: the first step's time (compilation included, from cold: inductor's caches on disk
are off), the steady step (median of the steps after the first two) and, for the compiled
ones, how many graphs dynamo compiled and the seconds it spent compiling them (dynamo's own
timers: every frame's compile, forward and backward).

  scripts/python scripts/peers/compile_inductor.py --steps 12

prints one JSON object per way.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402
from pipelining_gloo import StageModule  # noqa: E402

WAYS = ["eager", "stage", "block"]


def measure(way: str, steps: int, seed: int) -> dict:
    torch.set_num_threads(1)
    config = gpt.GPTConfig()
    model = gpt.build_gpt(config, seed)
    half = config.layers // 2
    stage = StageModule(model, half, config.layers, is_first=False, is_last=True)
    runner = stage
    if way == "stage":
        runner = torch.compile(stage)
    elif way == "block":
        for i, block in enumerate(stage.layers):
            stage.layers[i] = torch.compile(block)
    optimizer = torch.optim.SGD(stage.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(seed)
    # The activation stage 0 sends: its gradient is computed, as a pipeline stage must.
    x = torch.randn(2, config.seq_len, config.d_model, generator=gen, requires_grad=True)
    target = torch.randint(config.vocab_size, (2, config.seq_len), generator=gen)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        logits = runner(x)
        loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), target.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        x.grad = None
        times.append(time.perf_counter() - start)
    result = {"way": way, "first_step_s": times[0],
              "steady_step_ms": 1000 * statistics.median(times[2:] or times), "loss": float(loss)}
    if way != "eager":
        from torch._dynamo.utils import calculate_time_spent, counters
        result["graphs_compiled"] = int(counters["stats"]["unique_graphs"])
        result["compile_s"] = calculate_time_spent()["total_wall_time"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--way", choices=WAYS, help="run this way here (the driver's child)")
    args = parser.parse_args()
    if args.way:
        print(json.dumps(measure(args.way, args.steps, args.seed)), flush=True)
        return
    for way in WAYS:
        started = time.perf_counter()
        # A cold compile each time: inductor's caches on disk would otherwise serve later runs.
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="0",
                       TORCHINDUCTOR_AUTOGRAD_CACHE="0")
            out = subprocess.run([sys.executable, __file__, "--way", way, "--steps",
                                  str(args.steps), "--seed", str(args.seed)],
                                 capture_output=True, text=True, env=env)
        if out.returncode != 0:
            lines = out.stderr.strip().splitlines() or ["no output"]
            print(json.dumps({"way": way, "ok": False, "error": lines[-1]}), flush=True)
            continue
        lines = out.stdout.strip().splitlines()
        if not lines:
            print(json.dumps({"way": way, "ok": False, "error": "no output"}), flush=True)
            continue
        result = json.loads(lines[-1])
        result["process_s"] = time.perf_counter() - started
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
