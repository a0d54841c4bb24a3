#!/usr/bin/env python3
"""PyTorch's own training of ppstage's built-in gpt on one device: the peer of the GPU check's
MFU table (scripts/gpu/check_runs.py, issue 44 item 11).

The model is scripts/peers/gpt.py (the built-in gpt's module paths, ops and init), trained as a
PyTorch user would: bf16 autocast over fp32 parameters, cross-entropy on the next byte,
torch.optim.AdamW (fused where the device has it), one optimizer step per batch. Two ways:

  eager    the module as written
  compile  torch.compile(model) (inductor; the first steps include compilation)

Tokens are random ids below --vocab_size, drawn once: throughput does not depend on them.

  python3 scripts/gpu/mfu_peer.py --way compile --layers 24 --d_model 1024 --heads 16 \
      --seq_len 1024 --vocab_size 50304 --batch_size 8 --steps 20 --device cuda

prints one JSON object: the way, the device, the steady step (median of the steps after the
first --warmup), tokens per second, the first step's time, the parameter count and the model
FLOPs per token (flops_per_token below).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
import gpt  # noqa: E402


def flops_per_token(config: gpt.GPTConfig) -> float:
    """Model FLOPs of one trained token, forward and backward: 6 per weight of every matrix
    product (the blocks' four linears and the tied head, not the position table, which is a
    lookup) plus the attention scores and their product with the values, 12 L d T (PaLM's
    appendix B; the causal half is counted as ppstage's gpt computes it, unmasked)."""
    d, layers = config.d_model, config.layers
    block = 4 * d * d + 2 * config.mlp_ratio * d * d  # qkv, proj, fc, proj weights
    matmul_weights = layers * block + config.vocab_size * d
    return 6.0 * matmul_weights + 12.0 * layers * d * config.seq_len


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--way", choices=["eager", "compile"], required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="steps left out of the median")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    for name, value in vars(gpt.GPTConfig()).items():
        parser.add_argument("--" + name, type=int, default=value)
    args = parser.parse_args()
    if args.steps <= args.warmup:
        parser.error(f"--steps {args.steps} leaves no step after --warmup {args.warmup}")
    config = gpt.GPTConfig(**{k: getattr(args, k) for k in vars(gpt.GPTConfig())})
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    model = gpt.build_gpt(config, args.seed).to(device)
    params = gpt.count_parameters(model)
    fused = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=fused)
    generator = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, config.vocab_size, (args.batch_size, config.seq_len + 1),
                           generator=generator).to(device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    forward = torch.compile(model) if args.way == "compile" else model

    def step() -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = forward(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, config.vocab_size), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    times, losses = [], []
    for _ in range(args.steps):
        synchronize(device)
        start = time.perf_counter()
        loss = step()
        synchronize(device)
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
    step_s = statistics.median(times[args.warmup:])
    tokens_per_step = args.batch_size * config.seq_len
    print(json.dumps({
        "way": args.way,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "params": params,
        "flops_per_token": flops_per_token(config),
        "tokens_per_step": tokens_per_step,
        "first_step_s": times[0],
        "step_s": step_s,
        "tokens_per_s": tokens_per_step / step_s,
        "losses": losses,
    }))


if __name__ == "__main__":
    main()
