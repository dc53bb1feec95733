"""What ACLs in the metadata image cost the broker's authorizer: loading them and following a change.

Why: `Broker.apply_metadata` runs on the trio loop. A whole image (start-up, a snapshot, the
first publish after catching up) loads every ACL into the authorizer; after that each committed
CreateAcls / DeleteAcls changes a few. A slow load is an event loop that answers nothing (and a
broker that misses its heartbeats); a change that costs O(all ACLs) makes every ACL admin call
pay for the whole set.

Figures, per ACL count and pattern type (LITERAL names, or PREFIXED names of distinct lengths):
`load_ms` (a whole image into an empty authorizer) and `one_change_ms` (one more ACL committed,
the delta naming it), medians of `--runs` with min-max. `--tree LABEL=DIR` measures another
checkout (its `kafkapy` package) in the same run, as a subprocess, for an A/B.

    .venv/bin/python perf/acl_bench.py [--runs 5] [--counts 1000,10000] [--tree old=/tmp/old]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "acl_bench.json"
LITERAL, PREFIXED = 3, 4


def _image(n: int, pattern: int) -> Any:
    from kafkapy.controller.image import MetadataImage
    from kafkapy.controller.records import AccessControlEntryRecord

    image = MetadataImage()
    for i in range(n):
        # PREFIXED names of many lengths: the prefix index's worst case
        name = f"t{i}-" if pattern == LITERAL else "p" * (1 + i % 200) + f"{i}"
        image.apply(AccessControlEntryRecord(uuid.UUID(int=i + 1), 2, name, pattern, f"User:u{i % 50}", "*", 3, 3), i)
    return image


def _follow(authorizer: Any, image: Any, changed: list[uuid.UUID] | None) -> None:
    from kafkapy.server import broker  # imported before the first timing (measure)

    follow = broker._follow_acls
    if len(inspect.signature(follow).parameters) == 2:  # a tree whose feed diffs the whole set
        follow(authorizer, image)
    else:
        follow(authorizer, image, changed)


def measure(counts: list[int], runs: int) -> list[dict[str, Any]]:
    from kafkapy.authorizer import StandardAuthorizer
    from kafkapy.controller.records import AccessControlEntryRecord
    from kafkapy.server import broker  # noqa: F401  (its import is not part of a load)

    rows = []
    for n in counts:
        for pattern in (LITERAL, PREFIXED):
            image = _image(n, pattern)
            loads, changes = [], []
            for r in range(runs):
                authorizer = StandardAuthorizer()
                t = time.perf_counter()
                _follow(authorizer, image, None)
                loads.append(time.perf_counter() - t)
                new_id = uuid.UUID(int=10**9 + r)
                image.apply(AccessControlEntryRecord(new_id, 2, f"x{r}", pattern, "User:x", "*", 3, 3), n + r)
                t = time.perf_counter()
                _follow(authorizer, image, [new_id])
                changes.append(time.perf_counter() - t)
            rows.append({
                "acls": n, "pattern": "LITERAL" if pattern == LITERAL else "PREFIXED",
                "load_ms": _stats(loads), "one_change_ms": _stats(changes),
            })  # fmt: skip
    return rows


def _stats(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms)}


def _print(label: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        load, change = row["load_ms"], row["one_change_ms"]
        print(
            f"{label:>8} {row['acls']:>6} {row['pattern']:<8} load {load['median']:9.1f} ms "
            f"({load['min']:.1f}-{load['max']:.1f})  one change {change['median']:8.3f} ms "
            f"({change['min']:.3f}-{change['max']:.3f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--counts", default="1000,10000")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR")
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    if args.raw:
        json.dump(measure(counts, args.runs), sys.stdout)
        return
    results: dict[str, Any] = {"this": measure(counts, args.runs)}
    for spec in args.tree:
        label, _, tree = spec.partition("=")
        out = subprocess.run(
            [sys.executable, __file__, "--raw", "--runs", str(args.runs), "--counts", args.counts],
            env={**os.environ, "PYTHONPATH": tree}, cwd=tree, capture_output=True, text=True, check=True,
        )
        results[label] = json.loads(out.stdout)
    for label, rows in results.items():
        _print(label, rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
