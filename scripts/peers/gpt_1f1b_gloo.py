#!/usr/bin/env python3
"""A hand-written 2-process 1F1B pipeline of ppstage's gpt in plain PyTorch on gloo: the peer
that ppstage's own 1F1B is measured against (scripts/peers/check_reference.sh).

The model (scripts/peers/gpt.py) is cut by hand into stage 0 (wte, wpe, layers 0-3) and stage
1 (layers 4-7, ln_f, lm_head); one process per stage with one intra-op thread and one
OpenBLAS thread, bound to its own core, as mpirun runs ppstage's ranks. A step is what
`ppstage train` does with --pipeline.schedule 1f1b, so that both give the same losses (bit
for bit, on the same machine and libraries):

  data      --data.path synthetic: sample i is torch.randint(vocab, (seq_len + 1,)) drawn
            from sampleSeed(seed, i, 0) (src/data/dataset.cpp); input its first seq_len
            tokens, target its last seq_len; step t takes samples [t*batch, (t+1)*batch) and
            micro-batch m samples [m*mb, (m+1)*mb) of those
  schedule  1F1B: a warm-up of (stages - rank - 1) forwards, then one forward and one
            backward in turn, then the remaining backwards; activations (mb, T, C) float32
            go forward and their gradients back with isend/irecv
  loss      cross-entropy (mean over the micro-batch's tokens) x 1/microbatches; the step's
            loss is the sum of these (ExecutorOptions::loss_scale, StepStats::loss_sum)
  update    the tied embedding's gradient summed between wte.weight (stage 0) and
            lm_head.weight (stage 1), the global gradient norm over both stages (the tied
            tensor counted once) clipped to --grad-clip with max / (norm + 1e-6), then
            AdamW with LibTorch's defaults (betas 0.9, 0.999, eps 1e-8; weight decay on
            every parameter) (src/train/gradient_sync.cpp, step_runner.cpp, optimizer.cpp)

Run (gpt-small, 5 steps; --save builds the model with --seed first and writes it there):
  scripts/python scripts/peers/gpt_1f1b_gloo.py --save /tmp/gpt_small.pt --steps 5 \
      --json /tmp/peer.json
  scripts/python scripts/peers/gpt_1f1b_gloo.py --model /tmp/gpt_small.pt --steps 5
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from functools import partial

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402  (this folder's gpt.py)

STAGES = 2
SPLIT = 4  # stage 1 starts at layers.4
MASK64 = (1 << 64) - 1
GRAD_TAG = 1 << 16  # gradient messages' tags: GRAD_TAG + micro-batch; activations: micro-batch


# --- data: ppstage's synthetic token samples ---------------------------------------------

def sample_seed(seed: int, index: int, stream: int) -> int:
    """sampleSeed of src/data/dataset.cpp (splitmix64), in uint64 wrap-around arithmetic."""
    z = (seed * 0x9E3779B97F4A7C15 + index * 0xBF58476D1CE4E5B9 +
         stream * 0x94D049BB133111EB) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def sample_tokens(seed: int, index: int, vocab: int, seq_len: int) -> torch.Tensor:
    """Sample `index`'s seq_len + 1 tokens. Generator.manual_seed takes the uint64 as it is
    (values above 2**63 included), as at::detail::createCPUGenerator does."""
    gen = torch.Generator().manual_seed(sample_seed(seed, index, 0))
    return torch.randint(vocab, (seq_len + 1,), generator=gen, dtype=torch.long)


def step_microbatches(args, step: int):
    """The step's micro-batches as (inputs, targets) lists, each (mb, seq_len) int64."""
    mb = args.batch_size // args.microbatches
    inputs, targets = [], []
    for m in range(args.microbatches):
        first = step * args.batch_size + m * mb
        tokens = torch.stack([sample_tokens(args.data_seed, first + i, args.vocab_size,
                                            args.seq_len) for i in range(mb)])
        inputs.append(tokens[:, :args.seq_len])
        targets.append(tokens[:, 1:])
    return inputs, targets


# --- the two stages ----------------------------------------------------------------------

class Stage0(torch.nn.Module):
    """wte, wpe, layers 0..SPLIT-1: token ids (mb, T) -> activations (mb, T, C)."""

    def __init__(self, model: gpt.GPT):
        super().__init__()
        self.wte, self.wpe = model.wte, model.wpe
        self.layers = model.layers[:SPLIT]

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for layer in self.layers:
            x = layer(x)
        return x

    def tied(self):
        return self.wte.weight


class Stage1(torch.nn.Module):
    """layers SPLIT.., ln_f, lm_head: activations (mb, T, C) -> logits (mb, T, vocab)."""

    def __init__(self, model: gpt.GPT):
        super().__init__()
        self.layers = model.layers[SPLIT:]
        self.ln_f, self.lm_head = model.ln_f, model.lm_head

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_f(x))

    def tied(self):
        return self.lm_head.weight


# --- one rank ----------------------------------------------------------------------------

class StagePipeline:
    """One rank's stage and its 1F1B step."""

    def __init__(self, args, rank: int):
        self.args, self.rank = args, rank
        model = gpt.load_gpt(args.model, model_config(args))
        self.stage = Stage0(model) if rank == 0 else Stage1(model)
        # Each process holds its own copy of the tied tensor, as ppstage's stages do.
        self.params = list(self.stage.parameters())
        self.optimizer = torch.optim.AdamW(self.params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                                           weight_decay=args.weight_decay, foreach=False)
        self.mb = args.batch_size // args.microbatches
        self.act_shape = (self.mb, args.seq_len, args.d_model)

    # Stage 0 ---------------------------------------------------------------------------

    def _forward0(self, m, inputs, state):
        out = self.stage(inputs[m])
        state["out"][m] = out
        state["sends"].append(dist.isend(out.detach(), dst=1, tag=m))
        grad = torch.empty(self.act_shape)
        state["grad_recv"][m] = (dist.irecv(grad, src=1, tag=GRAD_TAG + m), grad)

    def _backward0(self, m, state):
        work, grad = state["grad_recv"].pop(m)
        work.wait()
        torch.autograd.backward(state["out"].pop(m), grad)

    # Stage 1 ---------------------------------------------------------------------------

    def _post_act_recv(self, m, state):
        if m < self.args.microbatches:
            act = torch.empty(self.act_shape)
            state["act_recv"][m] = (dist.irecv(act, src=0, tag=m), act)

    def _forward1(self, m, targets, state):
        work, act = state["act_recv"].pop(m)
        work.wait()
        self._post_act_recv(m + 1, state)  # the next micro-batch's arrives while this runs
        act.requires_grad_(True)
        logits = self.stage(act)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets[m].reshape(-1))
        scale = 1.0 / self.args.microbatches
        state["loss_sum"] += loss.item() * scale
        state["loss"][m] = (loss * scale, act)

    def _backward1(self, m, state):
        loss, act = state["loss"].pop(m)
        loss.backward()
        state["sends"].append(dist.isend(act.grad, dst=0, tag=GRAD_TAG + m))

    # The step --------------------------------------------------------------------------

    def run_actions(self, inputs, targets) -> float:
        """1F1B over the micro-batches; returns this rank's sum of scaled losses."""
        M = self.args.microbatches
        state = {"out": {}, "grad_recv": {}, "act_recv": {}, "loss": {}, "sends": [],
                 "loss_sum": 0.0}
        if self.rank == 0:
            forward = partial(self._forward0, inputs=inputs, state=state)
            backward = partial(self._backward0, state=state)
        else:
            self._post_act_recv(0, state)
            forward = partial(self._forward1, targets=targets, state=state)
            backward = partial(self._backward1, state=state)
        warmup = min(STAGES - self.rank - 1, M)
        for m in range(warmup):                 # warm-up: forwards only
            forward(m)
        for i in range(M - warmup):             # steady state: one forward, one backward
            forward(warmup + i)
            backward(i)
        for m in range(M - warmup, M):          # cool-down: the remaining backwards
            backward(m)
        for work in state["sends"]:
            work.wait()
        return state["loss_sum"]

    def step(self, step: int):
        """One optimizer step; returns (loss, grad_norm, seconds) on every rank."""
        inputs, targets = step_microbatches(self.args, step)  # before the clock, as ppstage
        start = time.perf_counter()
        loss_sum = self.run_actions(inputs, targets)
        for p in self.params:  # a parameter without a gradient counts as zeros (gradOf)
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        # Tied embedding: both ranks hold a copy; each gets the sum of the two gradients.
        dist.all_reduce(self.stage.tied().grad)
        # The global norm, the tied tensor counted once (stage 0's copy), with the loss in
        # the same all-reduce (float64, as ppstage's StepReduce).
        squared = sum(p.grad.double().pow(2).sum().item() for p in self.params
                      if self.rank == 0 or p is not self.stage.tied())
        reduced = torch.tensor([loss_sum, squared], dtype=torch.float64)
        dist.all_reduce(reduced)
        loss, norm = reduced[0].item(), reduced[1].item() ** 0.5
        coefficient = 1.0
        if self.args.grad_clip > 0:  # clipCoefficient of gradient_sync.cpp
            coefficient = min(1.0, self.args.grad_clip / (norm + 1e-6))
        if coefficient < 1:
            for p in self.params:
                p.grad.mul_(coefficient)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, norm, time.perf_counter() - start


def worker(rank: int, args, init_file: str):
    if args.bind:  # as mpirun binds ranks to cores (its default for 2 processes)
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) >= STAGES:
            os.sched_setaffinity(0, {cores[rank]})
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=STAGES)
    pipeline = StagePipeline(args, rank)
    stage_params = sum(p.numel() for p in pipeline.params)
    counts = torch.tensor([0, 0], dtype=torch.long)
    counts[rank] = stage_params
    dist.all_reduce(counts)
    dist.barrier()
    losses, norms, times = [], [], []
    for step in range(args.steps):
        loss, norm, seconds = pipeline.step(step)
        losses.append(loss)
        norms.append(norm)
        times.append(seconds)
        if rank == 0 and args.log:
            print(f"step {step + 1:4d}/{args.steps}  loss {loss:.6f}  time {seconds:.3f} s  "
                  f"grad_norm {norm:.4f}", flush=True)
    if rank == 0:
        write_results(args, losses, norms, times, counts.tolist())
    dist.barrier()
    dist.destroy_process_group()


def write_results(args, losses, norms, times, stage_params):
    model = gpt.load_gpt(args.model, model_config(args))
    parameters = gpt.count_parameters(model)
    tied = model.wte.weight.numel()
    assert sum(stage_params) - tied == parameters, (stage_params, tied, parameters)
    measured = statistics.median(times[1:] if len(times) > 1 else times)
    result = {
        "peer": "hand-written 1F1B, PyTorch " + torch.__version__ + ", gloo",
        "model": args.model,
        "config": asdict(model_config(args)),
        "stages": STAGES,
        "split": f"layers.{SPLIT}",
        "schedule": "1f1b",
        "batch_size": args.batch_size,
        "microbatches": args.microbatches,
        "threads_per_rank": args.threads,
        "openblas_threads": int(os.environ.get("OPENBLAS_NUM_THREADS", "0")),
        "bound_to_cores": args.bind,
        "lr": args.lr,
        "weight_decay": args.weight_decay,
        "grad_clip": args.grad_clip,
        "data_seed": args.data_seed,
        "parameters": parameters,
        "stage_parameters": stage_params,
        "losses": losses,
        "grad_norms": norms,
        "step_time_s": times,
        "measured_step_s": measured,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    print(f"peer 1f1b gloo: {args.steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"median step {measured:.3f} s (after the first), {parameters} parameters"
          + (f", {args.json}" if args.json else ""), flush=True)


def model_config(args) -> gpt.GPTConfig:
    return gpt.GPTConfig(**{k: getattr(args, k) for k in asdict(gpt.GPTConfig())})


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="TorchScript file written by gpt.py (save_scripted)")
    source.add_argument("--save", metavar="PATH",
                        help="build the model with --seed, save it to PATH and train that")
    parser.add_argument("--seed", type=int, default=0, help="init seed with --save")
    for name, value in asdict(gpt.GPTConfig()).items():
        parser.add_argument("--" + name, type=int, default=value)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--data-seed", type=int, default=0, help="ppstage's --train.seed")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    parser.add_argument("--bind", action=argparse.BooleanOptionalAction, default=True,
                        help="pin rank r to the r-th allowed core, as mpirun does (default)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--log", action="store_true", help="print every step")
    args = parser.parse_args()
    if args.batch_size % args.microbatches:
        parser.error("--batch-size must be a multiple of --microbatches")
    if args.layers <= SPLIT:
        parser.error(f"the split is at layers.{SPLIT}: --layers must be above it")
    return args


def limit_blas_threads(threads: int) -> None:
    """Debian's torch calls a pthreads OpenBLAS that torch.set_num_threads does not reach: it
    starts one thread per CPU it may run on, read when the library loads. mpirun binds each
    ppstage rank to one core, so there OpenBLAS runs one thread; the ranks spawned here load
    torch afresh with this limit in their environment. Without it each rank's GEMMs would run
    2 threads on this 2-core machine, and split their work otherwise: the gradients differ in
    the last bits from ppstage's, and the losses after the first step in the 8th digit."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[name] = str(threads)


def main():
    args = parse_args()
    limit_blas_threads(args.threads)
    if args.save:
        model = gpt.build_gpt(model_config(args), args.seed)
        gpt.save_scripted(model, args.save)
        args.model = args.save
    rendezvous = tempfile.mkdtemp(prefix="peer_1f1b_")
    try:
        mp.spawn(worker, args=(args, os.path.join(rendezvous, "init")), nprocs=STAGES, join=True)
    finally:
        shutil.rmtree(rendezvous, ignore_errors=True)


if __name__ == "__main__":
    main()
