"""Summarise a py-spy collapsed-stack profile (`py-spy record --format raw`) as text tables.

Why: flame graphs need a browser; the findings in perf/README.md quote where the broker's time
goes as plain shares of the samples. Two tables: *self* (the frame on top of the stack, i.e. where
the CPU actually was) and *inclusive* (any frame on the stack, i.e. what a call costs with its
callees), both in % of all non-idle samples.

Usage:
    perf/profile_summary.py PROFILE.txt [--top N] [--match SUBSTRING] [--json OUT]

`--match` keeps only samples whose stack contains SUBSTRING (e.g. `handle_produce`), to read one
phase's share. Frames are shown as `function (file:line)` with the file path shortened to the part
after `site-packages/` or the repository root.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def _short(frame: str) -> str:
    """`func (path/to/file.py:12)` -> `func (file.py)`: lines differ per sample, files do not."""
    match = re.match(r"^(?P<func>.*?) \((?P<path>[^:()]*)(?::\d+)?\)$", frame)
    if not match:
        return frame
    path = match["path"]
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{match['func']} ({path})"


def load(path: Path, match: str | None) -> list[tuple[list[str], int]]:
    stacks = []
    for raw in path.read_text().splitlines():
        m = _LINE.match(raw)
        if not m:
            continue
        if match and match not in m["stack"]:
            continue
        frames = [_short(f) for f in m["stack"].split(";")]
        stacks.append((frames, int(m["count"])))
    return stacks


def summarise(stacks: list[tuple[list[str], int]], top: int) -> dict[str, list[tuple[str, float]]]:
    total = sum(c for _, c in stacks) or 1
    self_c: Counter[str] = Counter()
    incl_c: Counter[str] = Counter()
    for frames, count in stacks:
        self_c[frames[-1]] += count
        for frame in set(frames):
            incl_c[frame] += count
    return {
        "samples": [("total", float(total))],
        "self": [(f, 100.0 * c / total) for f, c in self_c.most_common(top)],
        "inclusive": [(f, 100.0 * c / total) for f, c in incl_c.most_common(top)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    summary = summarise(load(args.profile, args.match), args.top)
    print(f"samples: {int(summary['samples'][0][1])}" + (f" (stacks containing {args.match!r})" if args.match else ""))
    for kind in ("self", "inclusive"):
        print(f"\n{kind:>9}%  frame")
        for frame, pct in summary[kind]:
            print(f"{pct:>9.1f}   {frame}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
