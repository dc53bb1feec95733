"""Partition fail-over as an acks=all producer sees it, with Kafka's default timeouts: SIGKILL of
a partition leader to the first acknowledged write on that partition, and a rolling restart
(SIGTERM, controlled shutdown) of every node under load.

Why measured: issue 12 found the first ack after a leader SIGKILL took a median of ~9 s
(Kafka's `broker.session.timeout.ms`), 19.5 s when the leader was also the active controller.
kafkapy fences a crashed broker as soon as its ports refuse connections (docs/cluster.md); the
goal is a median within 3 s and a maximum within 5 s. A rolling restart must fail no acks=all
write; its figure is the longest pause between acknowledgements.

Setup: a 3-node subprocess cluster (kafkapy.testing.cluster) with Kafka's defaults
(`broker.session.timeout.ms` 9000, `broker.heartbeat.interval.ms` 2000,
`replica.lag.time.max.ms` 30000), `min.insync.replicas` 2, one topic of 3 partitions with RF 3.
A confluent-kafka producer (acks=all, idempotent, `message.timeout.ms` 30000) writes about
`--rate` records per second round-robin over the partitions for the whole run.

Kill runs alternate between a partition leader that is not the active controller ("leader")
and the active controller's node ("leader+controller", a partition it leads); the figure is
SIGKILL -> first successful delivery report on that partition. `stall_others_s` is the longest
gap in acks on the other partitions after the kill (acks=all waits for the dead follower until
it leaves the ISR). The victim is restarted and the next run waits until every ISR is full.

    .venv/bin/python perf/leader_failover_bench.py [--runs 6] [--rolling 1] [--rate 300]
        [--vs-tree DIR] [--json perf/results/leader_failover_bench.json]

`--vs-tree DIR` runs the same scenarios on the kafkapy tree at DIR as well (the cluster
subprocesses run in DIR with PYTHONPATH=DIR), alternating with this tree, cluster by cluster (A/B in one
run). Prints each run and, per tree and victim kind, the median / max.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkapy.testing.cluster import ClusterProcesses

KAFKA_DEFAULTS = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
}
TOPIC = "failover"
PARTITIONS = 3
WAIT_S = 90.0


class Load:
    """A producer thread writing round-robin and recording every delivery report."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        self.acks: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}
        #: per partition: (produce() time, ack time) of every acknowledged record
        self.sent_acked: dict[int, list[tuple[float, float]]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[tuple[float, int, str]] = []
        self._stop = threading.Event()
        self._rate = rate
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 30000,
                "topic.metadata.refresh.interval.ms": 10000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, sent_at: float, err: Any, msg: Any) -> None:
        now = time.monotonic()
        if err is None:
            self.acks[msg.partition()].append(now)
            self.sent_acked[msg.partition()].append((sent_at, now))
        else:
            self.failed.append((now, msg.partition(), str(err)))

    def _run(self) -> None:
        i = 0
        start = time.monotonic()
        while not self._stop.is_set():
            due = start + i / self._rate
            if time.monotonic() < due:
                self._producer.poll(min(0.01, due - time.monotonic()))
                continue
            try:
                self._producer.produce(
                    TOPIC,
                    b"x" * 100,
                    partition=i % PARTITIONS,
                    on_delivery=functools.partial(self._report, time.monotonic()),
                )
            except BufferError:
                self._producer.poll(0.05)
                continue
            i += 1
            self._producer.poll(0)
        self._producer.flush(60)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def first_ack_of_sent_after(self, partition: int, t: float) -> float | None:
        """The first ack of a record produced after `t` (records sent before it may have been
        acknowledged before it, their reports delivered later)."""
        return min((a for s, a in self.sent_acked[partition] if s > t), default=None)

    def longest_gap(self, partitions: list[int], start: float, end: float) -> float:
        """The longest time without an ack on any of `partitions` within [start, end]."""
        worst = 0.0
        for p in partitions:
            times = [start] + [a for a in self.acks[p] if start < a <= end] + [end]
            worst = max(worst, max(b - a for a, b in itertools.pairwise(times)))
        return worst


def _layout(admin: AdminClient) -> dict[int, tuple[int, list[int]]]:
    md = admin.list_topics(TOPIC, timeout=10)
    return {p.id: (p.leader, list(p.isrs)) for p in md.topics[TOPIC].partitions.values()}


def _controller(admin: AdminClient) -> int:
    return int(admin.describe_cluster(request_timeout=10).result(timeout=15).controller.id)


def _wait(what: str, check: Any, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:  # a client call failing mid-failover: try again
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def _full_isrs(admin: AdminClient) -> bool:
    layout = _layout(admin)
    return len(layout) == PARTITIONS and all(
        len(isr) == 3 and leader >= 0 for leader, isr in layout.values()
    )


_HOME = Path.cwd()


def _start(base: Path, tree: str | None) -> ClusterProcesses:
    # `python -m kafkapy` imports from its working directory first, then PYTHONPATH
    os.chdir(tree or _HOME)
    if tree is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = tree
    cluster = ClusterProcesses(base, 3, overrides=KAFKA_DEFAULTS)
    cluster.start()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3)])[
        TOPIC
    ].result(30)
    _wait("full ISRs", lambda: _full_isrs(admin))
    return cluster


def kill_run(cluster: ClusterProcesses, load: Load, kind: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    _wait("full ISRs", lambda: _full_isrs(admin))
    controller = _controller(admin)
    layout = _layout(admin)
    if kind == "leader+controller":
        victim = controller
    else:
        victim = next(leader for leader, _ in layout.values() if leader != controller)
    led = [p for p, (leader, _) in layout.items() if leader == victim]
    if not led:
        return {"kind": kind, "victim": victim, "skipped": "the victim leads no partition"}
    others = [p for p in range(PARTITIONS) if p not in led]
    time.sleep(1.0)  # acks flowing before the kill
    t_kill = time.monotonic()
    cluster.kill(victim)
    killed = time.monotonic()
    first = _wait(
        f"an ack on partition {led[0]}", lambda: load.first_ack_of_sent_after(led[0], killed), 60
    )
    time.sleep(2.0)
    stall = load.longest_gap(others, t_kill, time.monotonic()) if others else None
    cluster.restart(victim)
    return {
        "kind": kind,
        "victim": victim,
        "partition": led[0],
        "first_ack_s": round(first - t_kill, 3),
        "stall_others_s": None if stall is None else round(stall, 3),
    }


def rolling_run(cluster: ClusterProcesses, load: Load) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    _wait("full ISRs", lambda: _full_isrs(admin))
    failed_before = len(load.failed)
    start = time.monotonic()
    exits = {}
    for node_id in sorted(cluster.nodes):
        exits[node_id] = cluster.terminate(node_id, timeout_s=30)
        cluster.restart(node_id)
        _wait("full ISRs", lambda: _full_isrs(admin))
    time.sleep(1.0)
    end = time.monotonic()
    return {
        "kind": "rolling-restart",
        "failed": len(load.failed) - failed_before,
        "longest_pause_s": round(load.longest_gap(list(range(PARTITIONS)), start, end), 3),
        "duration_s": round(end - start, 1),
        "exit_codes": exits,
    }


def one_cluster(
    tree: str | None, kills: list[str], rolling: int, rate: float
) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="leader-failover-") as tmp:
        cluster = _start(Path(tmp), tree)
        load = Load(cluster.bootstrap, rate)
        load.start()
        try:
            for kind in kills:
                results.append(kill_run(cluster, load, kind))
                print(tree or "this tree", results[-1], flush=True)
            for _ in range(rolling):
                results.append(rolling_run(cluster, load))
                print(tree or "this tree", results[-1], flush=True)
        finally:
            load.stop()
            cluster.stop()
        if load.failed:
            results.append(
                {"kind": "failed-deliveries", "count": len(load.failed), "first": load.failed[:5]}
            )
    return results


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("leader", "leader+controller"):
        xs = [r["first_ack_s"] for r in results if r.get("kind") == kind and "first_ack_s" in r]
        stalls = [
            r["stall_others_s"]
            for r in results
            if r.get("kind") == kind and r.get("stall_others_s") is not None
        ]
        if xs:
            out[kind] = {
                "runs": len(xs),
                "first_ack_median_s": round(statistics.median(xs), 3),
                "first_ack_min_s": min(xs),
                "first_ack_max_s": max(xs),
                "stall_others_median_s": round(statistics.median(stalls), 3) if stalls else None,
            }
    every = [r["first_ack_s"] for r in results if "first_ack_s" in r]
    if every:
        out["all_kills"] = {
            "runs": len(every),
            "median_s": round(statistics.median(every), 3),
            "max_s": max(every),
        }
    rolls = [r for r in results if r.get("kind") == "rolling-restart"]
    if rolls:
        out["rolling_restart"] = {
            "runs": len(rolls),
            "failed": sum(r["failed"] for r in rolls),
            "longest_pause_s": max(r["longest_pause_s"] for r in rolls),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs", type=int, default=6, help="SIGKILL runs per tree (alternating kinds)"
    )
    parser.add_argument("--rolling", type=int, default=1, help="rolling restarts per tree")
    parser.add_argument("--rate", type=float, default=300.0, help="records per second")
    parser.add_argument("--per-cluster", type=int, default=3, help="kill runs per fresh cluster")
    parser.add_argument("--vs-tree", default=None, help="another kafkapy tree to compare with")
    parser.add_argument("--json", default="perf/results/leader_failover_bench.json")
    args = parser.parse_args()
    kinds = ["leader" if i % 2 == 0 else "leader+controller" for i in range(args.runs)]
    trees: list[str | None] = [None] + ([str(Path(args.vs_tree).resolve())] if args.vs_tree else [])
    results: dict[str, list[dict[str, Any]]] = {t or "this tree": [] for t in trees}
    chunks = [kinds[i : i + args.per_cluster] for i in range(0, len(kinds), args.per_cluster)] or [
        []
    ]
    for n, chunk in enumerate(chunks):
        rolling = args.rolling if n == len(chunks) - 1 else 0
        for tree in trees:
            results[tree or "this tree"] += one_cluster(tree, chunk, rolling, args.rate)
    summary = {
        "scenario": "3 nodes, Kafka default timeouts, RF 3, min.insync.replicas 2, acks=all idempotent",
        "rate_per_s": args.rate,
        "goal": "leader SIGKILL -> first ack: median <= 3 s, max <= 5 s; rolling restart: 0 failed",
        "trees": {tree: {"summary": summarize(rs), "runs": rs} for tree, rs in results.items()},
    }
    for tree, data in summary["trees"].items():
        print(tree, json.dumps(data["summary"], indent=2))
    os.chdir(_HOME)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
