"""What ACLs in the metadata image cost the broker's authorizer: loading them and following a change.

Why: `Broker.apply_metadata` runs on the trio loop. A whole image (start-up, a snapshot, the
first publish after catching up) loads every ACL into the authorizer; after that each committed
CreateAcls / DeleteAcls changes a few. A slow load is an event loop that answers nothing (and a
broker that misses its heartbeats); a change that costs O(all ACLs) makes every ACL admin call
pay for the whole set.

Figures, per ACL count and pattern type (LITERAL names, or PREFIXED names of distinct lengths):
`load_ms` (a whole image into an empty authorizer) and `one_change_ms` (one more ACL committed,
the delta naming it); and the controller's side, which runs on the active controller's event
loop too: `delete_1000_filters_ms` (one DeleteAcls of 1,000 filters naming topics, none of which
has an ACL, over the N ACLs) and `refuse_create_100k_ms` (a CreateAcls of 100,000 new bindings,
refused whole for passing Kafka's 10,000-record bound). Medians of `--runs` with min-max. `--tree LABEL=DIR` measures another
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
                **_controller(image, n, runs),
            })  # fmt: skip
    return rows


def _controller(image: Any, n: int, runs: int) -> dict[str, Any]:
    from kafkapy.authorizer.acl import (
        AccessControlEntry,
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafkapy.controller.controller import ControllerConfig, QuorumController

    filters = [
        AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, f"none{i}", PatternType.LITERAL))
        for i in range(1000)
    ]
    entry = AccessControlEntry("User:y", "*", AclOperation.READ, AclPermissionType.ALLOW)
    too_many = [AclBinding(ResourcePattern(ResourceType.TOPIC, f"new{i}", PatternType.LITERAL), entry)
                for i in range(100_000)]
    deletes, refusals = [], []
    for _ in range(runs):
        controller = QuorumController(ControllerConfig(cluster_id="bench"), image)
        t = time.perf_counter()
        controller.delete_acls(filters)
        deletes.append(time.perf_counter() - t)
        t = time.perf_counter()
        controller.create_acls(too_many)
        refusals.append(time.perf_counter() - t)
    return {"delete_1000_filters_ms": _stats(deletes), "refuse_create_100k_ms": _stats(refusals)}


def _stats(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms)}


def _print(label: str, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        figures = "  ".join(
            f"{key} {row[key]['median']:.2f} ({row[key]['min']:.2f}-{row[key]['max']:.2f})"
            for key in ("load_ms", "one_change_ms", "delete_1000_filters_ms", "refuse_create_100k_ms")
            if key in row
        )
        print(f"{label:>8} {row['acls']:>6} {row['pattern']:<8} {figures}")


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
