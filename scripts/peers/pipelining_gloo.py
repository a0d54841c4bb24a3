#!/usr/bin/env python3
"""torch.distributed.pipelining on gloo: the anchor ppstage's schedules are measured against
(scripts/bench.sh peers).

The GPT of scripts/peers/gpt.py at gpt-small's size (8 blocks, d 256, 8 heads, vocab 256,
seq_len 128, the head tied to the token embedding), batch 16 x 128 in M = 8 micro-batches,
cross-entropy, SGD; ppstage's synthetic samples (--data.path synthetic, the same tokens as
scripts/peers/gpt_1f1b_gloo.py feeds). Two processes on gloo, each with one intra-op thread
and bound to its own core, as mpirun runs ppstage's ranks. Each schedule runs in a pair of
processes of its own, with a time limit:

  ScheduleGPipe, Schedule1F1B      one stage per rank: the embeddings and layers 0-3, then
                                   layers 4-7, ln_f and the head
  ScheduleInterleaved1F1B,         two stages per rank (layers in pairs), loop placement:
  ScheduleInterleavedZeroBubble    rank r holds stages r and r + 2
  ScheduleZBVZeroBubble,           two stages per rank, V placement: rank 0 holds stages 0
  ScheduleDualPipeV                and 3, rank 1 stages 1 and 2

The tied weight sits on the first and the last stage; where those are on different ranks its
gradient is summed between them after the schedule's step, before the optimizer, as ppstage
does. A schedule that raises is recorded with its error, one that runs past --timeout with
"timed out", and the next one runs.

  scripts/python scripts/peers/pipelining_gloo.py --steps 6 [--schedules Schedule1F1B,...]

prints one JSON object per schedule: {"schedule", "stages_per_rank", "ok", "ms_per_step"
(median of the steps after the first), "losses", "error"}.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402  (this folder's gpt.py)
from gpt_1f1b_gloo import step_microbatches  # noqa: E402  (ppstage's synthetic samples)

SCHEDULES = ["ScheduleGPipe", "Schedule1F1B", "ScheduleInterleaved1F1B",
             "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble", "ScheduleDualPipeV"]
SINGLE = {"ScheduleGPipe", "Schedule1F1B"}  # one stage per rank
V_SHAPED = {"ScheduleZBVZeroBubble", "ScheduleDualPipeV"}
RANKS = 2


class StageModule(nn.Module):
    """Layers [first, last) of the GPT, with the embeddings on stage 0 and ln_f and the head
    on the last stage. (B, T) ids or (B, T, C) activations in; activations or logits out."""

    def __init__(self, model: gpt.GPT, first: int, last: int, is_first: bool, is_last: bool):
        super().__init__()
        self.is_first, self.is_last = is_first, is_last
        if is_first:
            self.wte, self.wpe = model.wte, model.wpe
        self.layers = nn.ModuleList(model.layers[first:last])
        if is_last:
            self.ln_f, self.lm_head = model.ln_f, model.lm_head

    def forward(self, x):
        if self.is_first:
            pos = torch.arange(x.size(1), device=x.device)
            x = self.wte(x) + self.wpe(pos)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_f(x)) if self.is_last else x


def stage_indices(name: str, rank: int) -> list:
    if name in SINGLE:
        return [rank]
    if name in V_SHAPED:
        return [rank, 2 * RANKS - 1 - rank]
    return [rank, rank + RANKS]


def run_rank(rank: int, args, name: str, port: int, out_dir: str) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    result = {"schedule": name, "ok": False}
    try:
        result.update(train(rank, args, name))
        result["ok"] = True
    except Exception as e:  # recorded, not raised: the next schedule still runs
        result["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        result["traceback"] = traceback.format_exc()[-2000:]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    # No destroy_process_group after a failure: the peer may never reach it.
    if result["ok"]:
        dist.destroy_process_group()


def train(rank: int, args, name: str) -> dict:
    from torch.distributed import pipelining
    config = gpt.GPTConfig()
    args.vocab_size, args.seq_len = config.vocab_size, config.seq_len  # for step_microbatches
    model = gpt.build_gpt(config, args.seed)  # every rank the same initial parameters
    indices = stage_indices(name, rank)
    num_stages = RANKS * len(indices)
    per_stage = config.layers // num_stages
    stages, modules = [], []
    for index in indices:
        module = StageModule(model, index * per_stage, (index + 1) * per_stage,
                             index == 0, index == num_stages - 1)
        modules.append(module)
        stages.append(pipelining.PipelineStage(module, index, num_stages, torch.device("cpu")))
    params = list({id(p): p for m in modules for p in m.parameters()}.values())
    optimizer = torch.optim.SGD(params, lr=args.lr)
    tied = model.wte.weight
    tied_split = (0 in indices) != (num_stages - 1 in indices)  # first and last stage apart

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1))

    schedule_class = getattr(pipelining, name)
    schedule = (schedule_class(stages[0], n_microbatches=args.microbatches, loss_fn=loss_fn)
                if name in SINGLE else
                schedule_class(stages, n_microbatches=args.microbatches, loss_fn=loss_fn))
    times, losses = [], []
    for step in range(args.steps):
        inputs, targets = (torch.cat(part).contiguous() for part in step_microbatches(args, step))
        dist.barrier()
        start = time.perf_counter()
        step_losses = []
        kwargs = {}
        if any(s.is_last for s in stages):
            kwargs.update(target=targets, losses=step_losses)
        if any(s.is_first for s in stages):
            schedule.step(inputs, **kwargs)
        else:
            schedule.step(**kwargs)
        if tied_split:
            if tied.grad is None:
                tied.grad = torch.zeros_like(tied)
            dist.all_reduce(tied.grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        if step_losses:
            losses.append(float(torch.stack(step_losses).detach().mean()))
    return {"stages_per_rank": len(indices), "losses": losses,
            "ms_per_step": 1000 * statistics.median(times[1:] if len(times) > 1 else times)}


def run_schedule(args, name: str, port: int) -> dict:
    with tempfile.TemporaryDirectory() as out_dir:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=run_rank, args=(r, args, name, port, out_dir))
                 for r in range(RANKS)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + args.timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        if any(p.is_alive() for p in procs):
            for p in procs:
                p.kill()
                p.join()
            return {"schedule": name, "ok": False,
                    "error": f"timed out after {args.timeout:.0f} s (a hang)"}
        results = []
        for r in range(RANKS):
            path = os.path.join(out_dir, f"rank{r}.json")
            if not os.path.exists(path):
                return {"schedule": name, "ok": False,
                        "error": f"rank {r} exited with {procs[r].exitcode} and no result"}
            with open(path) as f:
                results.append(json.load(f))
    failed = [r for r in results if not r["ok"]]
    if failed:
        # The cause, not a peer's "Connection closed by peer" after the cause ended its rank.
        cause = min(failed, key=lambda r: "Connection closed" in r["error"]
                    or "Connection reset" in r["error"])
        return {"schedule": name, "ok": False, "error": cause["error"],
                "traceback": cause.get("traceback", "")}
    return {"schedule": name, "ok": True, "stages_per_rank": results[0]["stages_per_rank"],
            "ms_per_step": max(r["ms_per_step"] for r in results),
            "losses": next(r["losses"] for r in results if r["losses"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", default=",".join(SCHEDULES))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0, help="the model's (gpt.build_gpt)")
    parser.add_argument("--data-seed", type=int, default=0, help="ppstage's --train.seed")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    for i, name in enumerate(args.schedules.split(",")):
        result = run_schedule(args, name, args.port + i)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
