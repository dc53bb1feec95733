"""What the data plane itself costs: acks=1 against acks=all on the same three brokers, in one process.

Usage:
    perf/replication_bench.py [--runs N] [--messages N] [--partitions N] [--json out.json]

Three brokers run in this process (one trio thread, real sockets on 127.0.0.1, a real
QuorumController committing at once: the data-plane test harness of
tests/server/cluster/replication_helpers.py), with a topic of replication factor 3. A
librdkafka producer (1 KiB values, linger.ms=5, batch.size=1 MiB) in a worker thread sends
`--messages` per run, alternating acks=1 and acks=all so drift hits both alike.

Why in one process: every broker shares one Python thread, so the figures compare the *work*
replication adds (follower fetches, appends, HW/ISR bookkeeping, acks=all waits) without three
processes competing for this machine's cores as in perf/cluster_bench.py. A ratio near 1 means
acks=all adds no waiting beyond the CPU the followers need anyway.

Figures (median over runs, min-max spread): produce msgs/s and MiB/s per acks setting, and the
ratio acks=all / acks=1. Every loop stops by count and by time (--max-seconds per run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from confluent_kafka import Producer

PERF = Path(__file__).resolve().parent
sys.path.insert(0, str(PERF.parent))

from tests.server.cluster.replication_helpers import running_cluster  # noqa: E402

VALUE = b"x" * 1024


def produce(bootstrap: str, acks: str, messages: int, partitions: int, max_seconds: float) -> dict[str, Any]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1 << 20, "enable.idempotence": False})
    errors = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    start = time.perf_counter()
    deadline = start + max_seconds
    sent = 0
    for i in range(messages):
        if time.perf_counter() > deadline:
            break
        for _ in range(100_000):
            try:
                producer.produce("bench", VALUE, partition=i % partitions, on_delivery=delivered)
                sent += 1
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(max(deadline - time.perf_counter(), 1.0))
    secs = time.perf_counter() - start
    done = sent - left - errors
    return {"msgs_per_s": done / secs, "mib_per_s": done * len(VALUE) / secs / 2**20,
            "delivered": done, "errors": errors + left}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {"1": [], "all": []}
    with tempfile.TemporaryDirectory(prefix="kafkapy-repl-bench-") as tmp:
        async with running_cluster(Path(tmp), replica_fetch_wait_max_ms="500") as (controller, nodes):
            controller.create_topic("bench", partitions=args.partitions, rf=3)
            bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in nodes.values())
            for i in range(args.runs):
                for acks in ("1", "all"):
                    print(f"run {i + 1}/{args.runs}: acks={acks} ...", flush=True)
                    results[acks].append(await trio.to_thread.run_sync(
                        produce, bootstrap, acks, args.messages, args.partitions, args.max_seconds
                    ))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--json", type=Path, default=PERF / "results" / "replication_bench.json")
    args = parser.parse_args()
    results = trio.run(run, args)
    summary: dict[str, Any] = {"params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    print(f"{'acks':<6}{'msgs/s':>10}{'min-max':>20}{'MiB/s':>8}{'errors':>8}")
    for acks, runs in results.items():
        rates = [r["msgs_per_s"] for r in runs]
        median = statistics.median(rates)
        mib = statistics.median(r["mib_per_s"] for r in runs)
        errs = sum(r["errors"] for r in runs)
        summary[f"acks={acks}"] = {"median_msgs_per_s": median, "median_mib_per_s": mib,
                                   "spread": [min(rates), max(rates)], "errors": errs, "runs": runs}
        print(f"{acks:<6}{median:>10.0f}{f'{min(rates):.0f}-{max(rates):.0f}':>20}{mib:>8.1f}{errs:>8}")
    ratio = summary["acks=all"]["median_msgs_per_s"] / summary["acks=1"]["median_msgs_per_s"]
    summary["ratio_all_over_1"] = ratio
    print(f"ratio acks=all / acks=1 (medians): {ratio:.2f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
