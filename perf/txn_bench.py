"""Transactions benchmark against a real `kafkapy serve` subprocess, driven by librdkafka.

Figures (printed, and written to perf/results/txn_bench.json; median over --runs):

- `idempotent_msg_s`: plain idempotent produce (enable.idempotence, acks=all) of --messages
  values of --size bytes to one partition, first produce() to the end of flush().
- `txn100_msg_s` / `txn1000_msg_s` (+ `..._txn_s`): the same messages sent in transactions of
  100 and 1,000 messages (begin, produce, commit_transaction per transaction; the commit waits
  for the markers, so each transaction costs an AddPartitionsToTxn and an EndTxn round trip).
- `read_committed_msg_s` / `read_uncommitted_msg_s`: one consumer reading the transactional
  topic of the 100-message run from the beginning (every 10th transaction aborted, so the
  read_committed consumer also drops aborted records using the aborted-transaction lists);
  msg/s counted over the records each isolation level delivers, first record to last, median of
  5 reads per run (one read is only tens of milliseconds).

Why these: the first three show what a transaction costs next to idempotence alone (per
transaction round trips, amortised over its size); the last two show what read_committed costs
a consumer (the LSO bound and the aborted lists) next to read_uncommitted.

Run: .venv/bin/python perf/txn_bench.py [--messages N] [--size B] [--runs R]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

RESULTS = Path(__file__).parent / "results" / "txn_bench.json"
CONSUME_REPEATS = 5
READY = re.compile(r"kafkapy ready: listening on [^\s:]+:(\d+)")


def start_broker(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
         "--memory", "--override", "transaction.state.log.num.partitions=5",
         "--override", "offsets.topic.num.partitions=5"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = READY.search(log_path.read_text(errors="replace"))
        if m:
            return proc, f"127.0.0.1:{m.group(1)}"
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("broker did not start:\n" + log_path.read_text(errors="replace"))


def _values(n: int, size: int) -> list[bytes]:
    pad = os.urandom(size // 2).hex().encode()[:size]
    return [pad for _ in range(n)]


def bench_idempotent(bootstrap: str, topic: str, values: list[bytes]) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "batch.size": 1 << 20})
    start = time.perf_counter()
    for v in values:
        while True:
            try:
                p.produce(topic, value=v, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return len(values) / (time.perf_counter() - start)


def bench_transactional(bootstrap: str, topic: str, values: list[bytes], txn_size: int,
                        abort_every: int = 0) -> tuple[float, float]:
    """(msg/s, transactions/s); with `abort_every` every such transaction is aborted."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}",
                  "linger.ms": 5, "batch.size": 1 << 20})
    p.init_transactions(30)
    start = time.perf_counter()
    txns = 0
    for first in range(0, len(values), txn_size):
        p.begin_transaction()
        for v in values[first:first + txn_size]:
            while True:
                try:
                    p.produce(topic, value=v, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
        txns += 1
        if abort_every and txns % abort_every == 0:
            p.flush(60)  # on the broker, then aborted (not purged client-side)
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
    elapsed = time.perf_counter() - start
    return len(values) / elapsed, txns / elapsed


def bench_consume(bootstrap: str, topic: str, isolation: str, expect: int) -> float:
    """msg/s from the first record delivered to the last (connection and offset lookup
    excluded); short consume() timeouts so batching in the client does not quantise it."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}-{time.time()}",
                  "isolation.level": isolation, "enable.partition.eof": True,
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = last = 0.0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and got < expect:
            for m in c.consume(num_messages=1000, timeout=0.05):
                if m.error() is None:
                    last = time.perf_counter()
                    if got == 0:
                        start = last
                    got += 1
    finally:
        c.close()
    if got != expect or last <= start:
        raise SystemExit(f"{isolation}: read {got} records, expected {expect}")
    return (got - 1) / (last - start)


def create_topics(bootstrap: str, names: list[str]) -> None:
    """Up front, so no produce phase pays for auto-creation and metadata retries."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


def one_run(bootstrap: str, run: int, n: int, size: int) -> dict[str, float]:
    values = _values(n, size)
    create_topics(bootstrap, [f"{t}-{run}" for t in ("idem", "txn100", "txn1000", "mixed")])
    out: dict[str, float] = {}
    out["idempotent_msg_s"] = bench_idempotent(bootstrap, f"idem-{run}", values)
    for txn_size in (100, 1000):
        msg_s, txn_s = bench_transactional(bootstrap, f"txn{txn_size}-{run}", values, txn_size)
        out[f"txn{txn_size}_msg_s"] = msg_s
        out[f"txn{txn_size}_txn_s"] = txn_s
    mixed = f"mixed-{run}"
    bench_transactional(bootstrap, mixed, values, 100, abort_every=10)
    txns = (n + 99) // 100
    aborted_records = sum(
        len(values[i * 100:(i + 1) * 100]) for i in range(txns) if (i + 1) % 10 == 0
    )
    # a read of 50,000 small records takes tens of milliseconds: median of several reads
    out["read_uncommitted_msg_s"] = statistics.median(
        bench_consume(bootstrap, mixed, "read_uncommitted", n) for _ in range(CONSUME_REPEATS))
    out["read_committed_msg_s"] = statistics.median(
        bench_consume(bootstrap, mixed, "read_committed", n - aborted_records)
        for _ in range(CONSUME_REPEATS))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=RESULTS)
    args = ap.parse_args()
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        proc, bootstrap = start_broker(Path(tmp) / "broker.log")
        try:
            for run in range(args.runs):
                runs.append(one_run(bootstrap, run, args.messages, args.size))
                print(f"run {run + 1}/{args.runs}: " + ", ".join(f"{k}={v:,.0f}" for k, v in runs[-1].items()),
                      flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"\ntransactions, {args.messages:,} x {args.size} B messages, median of {args.runs} runs")
    rows = [
        ("idempotent produce", "idempotent_msg_s", None),
        ("transactional produce, 100/txn", "txn100_msg_s", "txn100_txn_s"),
        ("transactional produce, 1000/txn", "txn1000_msg_s", "txn1000_txn_s"),
        ("consume read_uncommitted", "read_uncommitted_msg_s", None),
        ("consume read_committed (10% aborted)", "read_committed_msg_s", None),
    ]
    for label, key, txn_key in rows:
        extra = f"  ({median[txn_key]:,.0f} txn/s)" if txn_key else ""
        print(f"  {label:<40} {median[key]:>10,.0f} msg/s{extra}")
    result: dict[str, Any] = {
        "bench": "txn_bench", "messages": args.messages, "size": args.size,
        "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "median": median, "runs": runs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
