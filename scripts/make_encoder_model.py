#!/usr/bin/env python3
"""Writes a scripted token model on torch.nn.TransformerEncoder (a model we did not write:
torch.nn's encoder layers, with nn.MultiheadAttention, dropout 0.1): the second model of
`scripts/bench.sh plan_budget`. Sizes as a user might train on 2 cores: vocab 256,
d_model 256, 8 heads, 8 layers of feed-forward 1024, sequences of 128.

usage: scripts/python scripts/make_encoder_model.py OUT.pt
"""
import sys

import torch
import torch.nn as nn


class TokenEncoder(nn.Module):
    def __init__(self, vocab=256, d=256, heads=8, layers=8, seq=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, seq, d))
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.embed(idx) + self.pos[:, :idx.size(1)]
        return self.head(self.encoder(x))


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.jit.script(TokenEncoder()).save(sys.argv[1])
