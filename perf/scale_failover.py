"""Fail-over at scale for perf/cluster_scale_bench.py: SIGTERM or SIGKILL of the node leading the
most partitions while an acks=all producer writes across every partition it leads.

Why its own module: the figures are what a user of a cluster with thousands of partitions sees
when one node goes away - how long until each partition the node led has a new leader
(`moved_s`, read from a surviving node's Metadata), until each takes an acks=all write produced
after the signal (`writes_s`, the latest such first ack over the partitions), and for SIGTERM
until the process is gone (`gone_s`, a controlled shutdown moves leadership first). Failed
deliveries are counted (`failed`, must be 0 for SIGTERM). The producer uses the client's
default timeouts, `acks=all` and idempotence, and writes round-robin at `rate` records per
second, so `writes_s` has a resolution of (partitions led / rate) seconds.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from kafkapy.testing.cluster import ClusterProcesses

TopicPartition = tuple[str, int]
WAIT_S = 120.0


class Load:
    """A producer thread writing round-robin over `targets`, keeping each partition's
    (produce time, ack time) pairs and every failed delivery."""

    def __init__(self, bootstrap: str, targets: list[TopicPartition], rate: float) -> None:
        self.targets = targets
        self.sent_acked: dict[TopicPartition, list[tuple[float, float]]] = {tp: [] for tp in targets}
        self.failed: list[tuple[float, TopicPartition, str]] = []
        self._rate = rate
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, sent_at: float, err: Any, msg: Any) -> None:
        now = time.monotonic()
        tp = (msg.topic(), msg.partition())
        if err is None:
            self.sent_acked[tp].append((sent_at, now))
        else:
            self.failed.append((now, tp, str(err)))

    def _run(self) -> None:
        i = 0
        start = time.monotonic()
        while not self._stop.is_set():
            due = start + i / self._rate
            if time.monotonic() < due:
                self._producer.poll(min(0.01, due - time.monotonic()))
                continue
            topic, partition = self.targets[i % len(self.targets)]
            try:
                self._producer.produce(
                    topic, b"x" * 100, partition=partition, on_delivery=functools.partial(self._report, time.monotonic())
                )
            except BufferError:
                self._producer.poll(0.05)
                continue
            i += 1
            self._producer.poll(0)
        self._producer.flush(300)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(330)

    def first_acks_after(self, t: float) -> dict[TopicPartition, float]:
        """Per partition, the first ack of a record produced after `t`."""
        firsts: dict[TopicPartition, float] = {}
        for tp, pairs in list(self.sent_acked.items()):
            acks = [a for s, a in list(pairs) if s > t]
            if acks:
                firsts[tp] = min(acks)
        return firsts


def leaders(admin: AdminClient, names: list[str]) -> dict[TopicPartition, int]:
    """Every partition of `names` and its leader as one node's Metadata says (-1: none)."""
    md = admin.list_topics(timeout=30).topics
    return {(t, p): pm.leader for t in names if t in md for p, pm in md[t].partitions.items()}


def busiest_leader(layout: dict[TopicPartition, int]) -> tuple[int, list[TopicPartition]]:
    """The node leading the most partitions, and those partitions."""
    counts: dict[int, int] = {}
    for leader in layout.values():
        counts[leader] = counts.get(leader, 0) + 1
    victim = max((n for n in counts if n >= 0), key=lambda n: counts[n])
    return victim, sorted(tp for tp, leader in layout.items() if leader == victim)


def _signal(cluster: ClusterProcesses, victim: int, how: str, gone: dict[str, float]) -> float:
    """Send SIGTERM/SIGKILL to `victim`; a thread notes when the process has exited."""
    proc = cluster.nodes[victim].proc
    assert proc is not None
    t0 = time.monotonic()
    proc.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)

    def reap() -> None:
        proc.wait()
        gone["at"] = time.monotonic()

    threading.Thread(target=reap, daemon=True).start()
    return t0


def _wait_moved(admin: AdminClient, names: list[str], moving: list[TopicPartition], victim: int, t0: float) -> float | None:
    """Seconds from `t0` until a surviving node's Metadata shows every partition in `moving`
    led by another live node (None: not within WAIT_S)."""
    while time.monotonic() < t0 + WAIT_S:
        try:
            layout = leaders(admin, names)
        except Exception:  # a refused Metadata during the fail-over: ask again
            time.sleep(0.2)
            continue
        if all(layout.get(tp, -1) not in (-1, victim) for tp in moving):
            return time.monotonic() - t0
        time.sleep(0.2)
    return None


def failover(
    cluster: ClusterProcesses, admin: AdminClient, names: list[str], how: str, rate: float
) -> dict[str, Any]:
    """One fail-over (`how` "term" or "kill") of the busiest leader under an acks=all load."""
    victim, moving = busiest_leader(leaders(admin, names))
    survivors = [n for n in cluster.live() if n != victim]
    load = Load(cluster.bootstrap_of(*survivors, victim), moving, rate)
    load.start()
    time.sleep(max(3.0, 2 * len(moving) / rate))  # every partition acked once before the signal
    gone: dict[str, float] = {}
    t0 = _signal(cluster, victim, how, gone)
    moved_s = _wait_moved(admin, names, moving, victim, t0)
    writes_s: float | None = None
    while time.monotonic() < t0 + WAIT_S:
        firsts = load.first_acks_after(t0)
        if len(firsts) == len(moving):
            writes_s = max(firsts.values()) - t0
            break
        time.sleep(0.2)
    load.stop()
    cluster.kill(victim)  # reaps it (a no-op when it is already gone)
    return {
        "victim": victim,
        "partitions_moved": len(moving),
        "moved_s": moved_s,
        "writes_s": writes_s,
        "gone_s": gone["at"] - t0 if "at" in gone else None,
        "failed": len(load.failed),
        "failed_first": load.failed[0][2] if load.failed else "",
        "acked": sum(len(v) for v in load.sent_acked.values()),
    }
