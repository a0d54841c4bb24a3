#!/usr/bin/env python3
"""Makes the token files of a text, as the GPT data-preparation scripts do: byte-level tokens
(ids 0-255, one per byte) as uint16, the first 95% to train.bin and the rest to val.bin,
with llm.c's 256-int32 header (magic 20240520, version 1, token count) unless --bare.
Standard library only.

  scripts/python scripts/make_token_files.py /usr/share/doc/jargon-text/jargon.txt.gz data/jargon
  mpirun -np 2 ppstage train --config configs/gpt-tokens.ini
"""
import argparse
import array
import gzip
import os
import sys


def write_tokens(path: str, tokens: array.array, header: bool):
    with open(path, "wb") as f:
        if header:
            words = array.array("i", [0] * 256)
            words[0], words[1], words[2] = 20240520, 1, len(tokens)
            f.write(words.tobytes())
        f.write(tokens.tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", help="a text file, gzipped or not")
    parser.add_argument("out", help="the folder for train.bin and val.bin")
    parser.add_argument("--bare", action="store_true", help="no header: plain uint16 tokens")
    parser.add_argument("--val_fraction", type=float, default=0.05)
    args = parser.parse_args()
    opener = gzip.open if args.text.endswith(".gz") else open
    with opener(args.text, "rb") as f:
        data = f.read()
    tokens = array.array("H", list(data))  # one token per byte
    if sys.byteorder != "little":
        tokens.byteswap()
    split = int(len(tokens) * (1 - args.val_fraction))
    os.makedirs(args.out, exist_ok=True)
    write_tokens(os.path.join(args.out, "train.bin"), tokens[:split], not args.bare)
    write_tokens(os.path.join(args.out, "val.bin"), tokens[split:], not args.bare)
    print(f"{args.out}: train.bin {split} tokens, val.bin {len(tokens) - split} tokens "
          f"(bytes of {args.text}, uint16{'' if args.bare else ' after a header'})")


if __name__ == "__main__":
    main()
