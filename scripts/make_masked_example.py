#!/usr/bin/env python3
"""Makes the two-input example: a Hugging Face style GPT-2 that takes input_ids,
attention_mask and labels and returns its loss (--train.loss model), and its data as
torch.save dicts of the three, from the paragraphs of a text: byte-level ids (0-255), one
paragraph per sample cut at --seq_len, padded with 0 (attention_mask 0, labels -100);
the first 95% of the paragraphs to train.pt, the rest to val.pt. Needs torch (scripts/python runs the environment of scripts/install-deps.sh).

  scripts/python scripts/make_masked_example.py /usr/share/doc/jargon-text/jargon.txt.gz data/jargon-masked
  mpirun -np 2 ppstage train --config configs/gpt2-masked.ini
"""
import argparse
import gzip
import os
import re

import torch

from make_fixtures import GPT2Config, GPT2WithLoss


def samples(paragraphs, seq_len: int):
    n = len(paragraphs)
    input_ids = torch.zeros(n, seq_len, dtype=torch.long)
    mask = torch.zeros(n, seq_len, dtype=torch.long)
    labels = torch.full((n, seq_len), -100, dtype=torch.long)
    for i, text in enumerate(paragraphs):
        ids = torch.tensor(list(text[:seq_len + 1]), dtype=torch.long)
        length = len(ids) - 1
        input_ids[i, :length] = ids[:length]
        mask[i, :length] = 1
        labels[i, :length] = ids[1:]
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", help="a text file, gzipped or not; paragraphs end at blank lines")
    parser.add_argument("out", help="the folder for model.pt, train.pt and val.pt")
    parser.add_argument("--seq_len", type=int, default=64)
    parser.add_argument("--val_fraction", type=float, default=0.05)
    args = parser.parse_args()
    opener = gzip.open if args.text.endswith(".gz") else open
    with opener(args.text, "rb") as f:
        text = f.read()
    paragraphs = [p.strip() for p in re.split(rb"\n\s*\n", text)]
    paragraphs = [p for p in paragraphs if len(p) >= 8]
    split = int(len(paragraphs) * (1 - args.val_fraction))
    os.makedirs(args.out, exist_ok=True)
    torch.save(samples(paragraphs[:split], args.seq_len), os.path.join(args.out, "train.pt"))
    torch.save(samples(paragraphs[split:], args.seq_len), os.path.join(args.out, "val.pt"))

    config = GPT2Config()
    config.vocab_size, config.n_positions, config.n_embd = 256, args.seq_len, 128
    config.n_layer, config.n_head = 4, 4
    torch.manual_seed(0)
    module = GPT2WithLoss(config)
    for name, p in module.named_parameters():  # GPT-2's initialisation: N(0, 0.02), zero biases
        if name.endswith("bias"):
            torch.nn.init.zeros_(p)
        elif p.dim() >= 2:
            torch.nn.init.normal_(p, std=0.02)
    model = torch.jit.script(module)
    torch.jit.save(model, os.path.join(args.out, "model.pt"))
    print(f"{args.out}: model.pt (GPT-2, {sum(p.numel() for p in model.parameters())} "
          f"parameters), train.pt {split} and val.pt {len(paragraphs) - split} paragraphs "
          f"of {args.text} (input_ids, attention_mask, labels; seq_len {args.seq_len})")


if __name__ == "__main__":
    main()
