#!/usr/bin/env python3
"""Checks that every box of the data flow includes only the boxes below it.

    scripts/check_includes.py

A file's box is its folder: src/<box>/, include/ppstage/<box>/ (schedules/ counts as
schedule). Each `#include "ppstage/<other>/..."` is an arrow box -> other, allowed only
when ALLOWED lists it. Arrows run down the data flow of docs/architecture.md: a new arrow
upward (split/ reaching into compile/, comm/ into observe/) is a structural change to be
made on purpose, here, not by an include slipped into a file. Exits 1 naming every
include that is not allowed.
"""
import pathlib
import re
import sys

# box -> the boxes it may include (besides itself). Keep it short and in data-flow order.
ALLOWED = {
    "core": set(),
    "config": {"core"},
    "graph": {"core"},
    "models": {"config", "core"},
    "data": {"config", "core"},
    "schedule": {"config", "core"},
    "split": {"graph", "models", "config", "core"},
    "parallel": {"split", "graph", "comm", "observe", "config", "core"},
    "compile": {"graph", "observe", "config", "core"},
    "comm": {"core"},
    "observe": {"comm", "schedule", "config", "core"},
    "runtime": {"comm", "compile", "schedule", "split", "graph", "observe", "config", "core"},
    "checkpoint": {"split", "graph", "models", "config", "core"},
    "plan": {"split", "schedule", "config", "core"},
    "measure": {"plan", "runtime", "comm", "compile", "split", "graph", "observe", "config", "core"},
    "train": {"measure", "plan", "parallel", "checkpoint", "runtime", "comm", "compile", "schedule", "split", "graph",
              "models", "data", "observe", "config", "core"},
    "cli": {"train", "measure", "plan", "parallel", "checkpoint", "runtime", "comm", "compile", "schedule", "split", "graph",
            "models", "data", "observe", "config", "core"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"ppstage/([a-z_]+)/', re.MULTILINE)


def box_of(path):
    parts = path.parts
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[:2] == ("include", "ppstage") and len(parts) > 3:
        return parts[2]
    if parts[0] == "schedules":
        return "schedule"
    return None


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    files = [p for d in ("src", "include", "schedules") for p in (root / d).rglob("*")
             if p.suffix in (".h", ".cpp")]
    bad = []
    for path in sorted(files):
        rel = path.relative_to(root)
        box = box_of(rel)
        if box is None:
            continue
        if box not in ALLOWED:
            bad.append(f"{rel}: box '{box}' is not in scripts/check_includes.py's ALLOWED")
            continue
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            other = m.group(1)
            if other != box and other not in ALLOWED[box]:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{rel}:{line}: {box}/ includes {other}/, which is above it "
                           f"(allowed: {', '.join(sorted(ALLOWED[box])) or 'nothing'})")
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
