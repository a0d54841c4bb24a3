#!/usr/bin/env python3
"""ppstage's built-in `gpt` (src/models/gpt.cpp, src/models/layers.cpp) as a PyTorch module.

Same module paths and parameter names as the built-in model (wte, wpe, layers.N.{ln1, attn.qkv,
attn.proj, ln2, mlp.fc, mlp.proj}, ln_f, lm_head with lm_head.weight tied to wte.weight), the
same ATen ops in the same order (fused qkv split, triu causal mask, softmax, exact gelu, layer
norm eps 1e-5, bias-free torch.linear head) and the same kind of init (N(0, 0.02) linear and
embedding weights, zero biases, layer norm ones/zeros). Values differ from ppstage's own init,
which draws from its own generator: to compare, ppstage trains the file this module saves.

  scripts/python scripts/peers/gpt.py --save /tmp/gpt_small.pt   # gpt-small, seed 0
  mpirun -np 2 ppstage train --model.name /tmp/gpt_small.pt --model.seq_len 128 ...

A model file takes token ids (int64, batch first); ppstage's example input for it is
(--train.batch_size, --model.seq_len) with ids below --model.vocab_size, so pass the
model's seq_len (and vocab_size when it is not the default 256).
"""
import argparse
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F  # F.linear and F.gelu script to aten::linear, aten::gelu

INIT_STD = 0.02  # kInitStd in gpt.cpp, 0.02 in layers::linear


@dataclass
class GPTConfig:
    """configs/gpt-small.ini: layers 8, d_model 256, heads 8, vocab 256, seq_len 128."""
    layers: int = 8
    d_model: int = 256
    heads: int = 8
    vocab_size: int = 256
    seq_len: int = 128
    mlp_ratio: int = 4


class Embedding(nn.Module):
    def __init__(self, rows: int, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, d).normal_(0.0, INIT_STD))

    def forward(self, idx):
        return torch.embedding(self.weight, idx)


class Linear(nn.Module):
    """y = x W^T + b; W ~ N(0, 0.02), b = 0 (layers::linear)."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in).normal_(0.0, INIT_STD))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class LayerNorm(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.normalized_shape = [d]

    def forward(self, x):
        # eps 1e-5 as layers::layerNorm (a literal: TorchScript cannot read module globals)
        return torch.layer_norm(x, self.normalized_shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused qkv projection (attentionForward)."""

    def __init__(self, c: GPTConfig):
        super().__init__()
        self.qkv = Linear(c.d_model, 3 * c.d_model)
        self.proj = Linear(c.d_model, c.d_model)
        self.n_head = c.heads

    def forward(self, x):
        # x: (B, T, C) -> (B, T, C)
        B = x.size(0)
        T = x.size(1)
        C = x.size(2)
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, 2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / float(hs) ** 0.5)  # (B, nh, T, T)
        future = torch.ones([T, T], device=x.device).triu(1) > 0.5
        att = torch.softmax(att.masked_fill(future, float("-inf")), -1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class FeedForward(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.fc = Linear(d, hidden)
        self.proj = Linear(hidden, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.ln1 = LayerNorm(c.d_model)
        self.attn = CausalSelfAttention(c)
        self.ln2 = LayerNorm(c.d_model)
        self.mlp = FeedForward(c.d_model, c.mlp_ratio * c.d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class LMHead(nn.Module):
    """Bias-free head; its weight is the token embedding's (tied)."""

    def __init__(self, weight: nn.Parameter):
        super().__init__()
        self.weight = weight

    def forward(self, x):
        return F.linear(x, self.weight)


class GPT(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        # Drawn in the built-in model's order: wte, wpe, then each block's qkv, proj, fc, proj.
        self.wte = Embedding(c.vocab_size, c.d_model)
        self.wpe = Embedding(c.seq_len, c.d_model)
        self.layers = nn.ModuleList([Block(c) for _ in range(c.layers)])
        self.ln_f = LayerNorm(c.d_model)
        self.lm_head = LMHead(self.wte.weight)

    def forward(self, idx):
        # idx: (B, T) token ids -> logits (B, T, vocab)
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_f(x))


def build_gpt(config: GPTConfig = GPTConfig(), seed: int = 0) -> GPT:
    """A freshly initialised GPT, reproducible from `seed` (torch's global generator)."""
    torch.manual_seed(seed)
    return GPT(config)


def count_parameters(model: nn.Module) -> int:
    """Elements of the unique parameters (the tied head counted once)."""
    return sum(p.numel() for p in model.parameters())  # parameters() skips repeated tensors


def save_scripted(model: GPT, path: str) -> None:
    """Writes `model` as TorchScript (torch.jit.script + torch.jit.save), the tie kept: the
    loaded wte.weight and lm_head.weight are one tensor, which ppstage finds as a tie."""
    torch.jit.save(torch.jit.script(model), path)


def load_gpt(path: str, config: GPTConfig = GPTConfig()) -> GPT:
    """An eager GPT holding the parameters of a file save_scripted wrote (strict shapes)."""
    scripted = torch.jit.load(path, map_location="cpu")
    model = GPT(config)
    model.load_state_dict(scripted.state_dict(), strict=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--save", required=True, help="TorchScript file to write")
    parser.add_argument("--seed", type=int, default=0)
    for name, value in asdict(GPTConfig()).items():
        parser.add_argument("--" + name, type=int, default=value)
    args = parser.parse_args()
    config = GPTConfig(**{k: getattr(args, k) for k in asdict(GPTConfig())})
    model = build_gpt(config, args.seed)
    save_scripted(model, args.save)
    print(f"{args.save}: gpt {asdict(config)}, {count_parameters(model)} parameters")


if __name__ == "__main__":
    main()
