"""The status page's data: a short history of throughput and group lag, and `/api/status`.

Why a history on the server: the page's charts show the last minutes as soon as it opens (not
only from when the browser started polling). `History.run` samples every `SAMPLE_S` into a
ring of `HISTORY_SAMPLES` (10 minutes): cumulative message/byte counters from `BrokerStats`
(the page derives rates from consecutive samples), every group's total lag, and each partition's
log end offset and size, from which the per-partition and per-topic message and byte rates of the
tables come (a partition's byte rate is its log's growth: appends as leader or follower, so
retention or compaction in an interval reads as 0, never as a negative rate).

Why "cluster" rates from partitions: a node's own counters cover what it appended as leader; the
sum over every partition with a replica here (each once) is the cluster's traffic on a single
node, and as much of it as this node sees in a cluster (`cluster_rates` says how many partitions).
It runs only while the HTTP listener is on, on the trio thread, one pass over partitions and
groups per sample.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from kafkapy.controller.budgets import DEFAULT_MAX_BROKER_PARTITIONS, DEFAULT_MAX_PARTITIONS
from kafkapy.server.http.tiered import RemoteFetchRates, tiered_rows
from kafkapy.server.http.views import (
    PartitionView,
    broker_views,
    cluster_view,
    group_views,
    offline_logs,
    partition_views,
    topic_configs,
    uncleanable_partitions,
)

if TYPE_CHECKING:
    from kafkapy.server.http.host import ServedNode

__all__ = ["HISTORY_SAMPLES", "SAMPLE_S", "History", "status_json"]

SAMPLE_S = 2.0
HISTORY_SAMPLES = 300
#: partitions in the page's hot-partition table
HOT_PARTITIONS = 10


@dataclass(slots=True)
class Sample:
    t_ms: int
    messages_in: int
    bytes_in: int
    bytes_out: int
    lag: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t_ms,
            "messages_in": self.messages_in,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "lag": self.lag,
        }


class History:
    """Samples of one server (see the module doc)."""

    def __init__(self, server: ServedNode) -> None:
        self.server = server
        self.samples: deque[Sample] = deque(maxlen=HISTORY_SAMPLES)
        #: messages per second over the last sample interval, per (topic, partition)
        self.partition_rates: dict[tuple[str, int], float] = {}
        #: log bytes appended per second over the last sample interval, per (topic, partition)
        self.partition_byte_rates: dict[tuple[str, int], float] = {}
        self._last_ends: dict[tuple[str, int], tuple[int, int]] = {}
        self._last_time = 0.0
        #: remote fetches, bytes and errors per second per topic (tiered storage)
        self.remote_fetch_rates = RemoteFetchRates()

    def sample(self) -> None:
        stats = self.server.broker.stats
        now = time.monotonic()
        ends = {
            (v.topic, v.partition): (v.log_end_offset, v.size_bytes)
            for v in partition_views(self.server.broker)
            if v.local
        }
        if self._last_time:
            elapsed = max(now - self._last_time, 1e-3)
            last = self._last_ends
            self.partition_rates = {
                key: max(end - last.get(key, (end, size))[0], 0) / elapsed
                for key, (end, size) in ends.items()
            }
            self.partition_byte_rates = {
                key: max(size - last.get(key, (end, size))[1], 0) / elapsed
                for key, (end, size) in ends.items()
            }
        self._last_ends, self._last_time = ends, now
        self.remote_fetch_rates.sample(self.server.broker, now)
        self.samples.append(
            Sample(
                int(time.time() * 1000),
                sum(stats.messages_in.values()),
                sum(stats.bytes_in.values()),
                sum(stats.bytes_out.values()),
                {g.group_id: g.lag for g in group_views(self.server.broker)},
            )
        )

    def rates(self) -> dict[str, float]:
        """Messages and bytes per second over the last sample interval (0 before two samples)."""
        if len(self.samples) < 2:
            return {"messages_in": 0.0, "bytes_in": 0.0, "bytes_out": 0.0}
        a, b = self.samples[-2], self.samples[-1]
        dt = max((b.t_ms - a.t_ms) / 1000, 1e-3)
        return {
            "messages_in": max(b.messages_in - a.messages_in, 0) / dt,
            "bytes_in": max(b.bytes_in - a.bytes_in, 0) / dt,
            "bytes_out": max(b.bytes_out - a.bytes_out, 0) / dt,
        }

    async def run(self) -> None:
        while True:
            self.sample()
            await trio.sleep(SAMPLE_S)


def topic_rows(
    partitions: list[PartitionView], history: History, configs: dict[str, dict[str, str]]
) -> list[dict[str, Any]]:
    """Per topic: partition count, this node's replicas' bytes and messages, message and byte
    rates, internal or not, and the configs set on the topic."""
    topics: dict[str, dict[str, Any]] = {}
    for v in partitions:
        row = topics.setdefault(
            v.topic,
            {"name": v.topic, "partitions": 0, "size_bytes": 0, "messages": 0,
             "messages_per_s": 0.0, "bytes_per_s": 0.0, "internal": v.internal,
             "under_replicated": 0, "configs": configs.get(v.topic, {})},
        )
        key = (v.topic, v.partition)
        row["partitions"] += 1
        row["size_bytes"] += v.size_bytes
        row["messages_per_s"] += history.partition_rates.get(key, 0.0)
        row["bytes_per_s"] += history.partition_byte_rates.get(key, 0.0)
        row["under_replicated"] += int(v.under_replicated)
        if v.local:
            row["messages"] += max(v.log_end_offset - v.log_start_offset, 0)
    return list(topics.values())


def _partition_row(v: PartitionView, history: History) -> dict[str, Any]:
    key = (v.topic, v.partition)
    return {
        "topic": v.topic, "partition": v.partition, "leader": v.leader,
        "replicas": list(v.replicas), "isr": list(v.isr), "local": v.local,
        "size_bytes": v.size_bytes, "segments": v.segments,
        "log_start_offset": v.log_start_offset, "log_end_offset": v.log_end_offset,
        "high_watermark": v.high_watermark,
        "messages_per_s": history.partition_rates.get(key, 0.0),
        "bytes_per_s": history.partition_byte_rates.get(key, 0.0),
    }


def cluster_rates(partitions: list[PartitionView], history: History) -> dict[str, Any]:
    """Messages and bytes per second into the cluster's non-internal partitions that have a
    replica here (see the module doc), and how many of all partitions those are."""
    seen = [v for v in partitions if v.local and not v.internal]
    return {
        "messages_in": sum(history.partition_rates.get((v.topic, v.partition), 0.0) for v in seen),
        "bytes_in": sum(history.partition_byte_rates.get((v.topic, v.partition), 0.0) for v in seen),
        "partitions_seen": len(seen),
        "partitions": sum(1 for v in partitions if not v.internal),
    }


def hot_partitions(partitions: list[PartitionView], history: History) -> list[dict[str, Any]]:
    """The `HOT_PARTITIONS` non-internal partitions with a replica here that grow fastest
    (bytes in per second, then messages per second), hottest first."""
    rows = [_partition_row(v, history) for v in partitions if v.local and not v.internal]
    rows.sort(key=lambda r: (-r["bytes_per_s"], -r["messages_per_s"], r["topic"], r["partition"]))
    return rows[:HOT_PARTITIONS]


def partition_budget(server: ServedNode) -> dict[str, Any]:
    """KIP-578's budgets as this node is configured (the active controller enforces its own;
    nodes of a cluster normally share them): None when unlimited, and the cluster's partition
    count against `max.partitions`."""
    config = server.broker.config
    per_broker = config.get_int("max.broker.partitions")
    total = config.get_int("max.partitions")
    image = server.broker.cluster.image
    return {
        "max_broker_partitions": None if per_broker >= DEFAULT_MAX_BROKER_PARTITIONS else per_broker,
        "max_partitions": None if total >= DEFAULT_MAX_PARTITIONS else total,
        "partitions": sum(len(t.partitions) for t in image.topics.values()),
    }


def storage_health(server: ServedNode) -> dict[str, Any]:
    """The uncleanable partitions and the offline partition logs of this node."""
    return {
        "uncleanable": [
            {"topic": u.topic, "partition": u.partition, "data_dir": u.data_dir,
             "reason": u.reason, "since_ms": u.since_ms}
            for u in uncleanable_partitions(server.broker)
        ],
        "offline": [
            {"topic": o.topic, "partition": o.partition, "data_dir": o.data_dir, "reason": o.reason}
            for o in offline_logs(server.broker)
        ],
    }


def _groups(server: ServedNode) -> list[dict[str, Any]]:
    return [
        {"group_id": g.group_id, "protocol": g.protocol, "state": g.state, "lag": g.lag,
         "members": [
             {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host}
             for m in g.members
         ],
         "offsets": [
             {"topic": o.topic, "partition": o.partition, "committed": o.committed,
              "end_offset": o.end_offset, "lag": o.lag}
             for o in g.offsets
         ]}
        for g in group_views(server.broker)
    ]


def status_json(server: ServedNode, history: History, *, summary: bool = False) -> dict[str, Any]:
    """Everything the page shows, as JSON. `summary`: without the per-partition rows (what the
    page's script polls every 2 s: it needs only counts, groups and the history)."""
    broker = server.broker
    partitions = partition_views(broker)
    configs = topic_configs(broker)
    return {
        "cluster": cluster_view(server),
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
             "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
             "replicas": b.replicas, "leaders": b.leaders}
            for b in broker_views(broker)
        ],
        "partition_budget": partition_budget(server),
        "connections": len(server.connections),
        "topics": topic_rows(partitions, history, configs),
        "tiered": tiered_rows(broker, partitions, configs, history.remote_fetch_rates),
        "partition_count": len(partitions),
        "under_replicated": sum(v.under_replicated for v in partitions),
        "partitions": [] if summary else [_partition_row(v, history) for v in partitions],
        "hot_partitions": [] if summary else hot_partitions(partitions, history),
        "storage": storage_health(server),
        "groups": _groups(server),
        "rates": history.rates(),
        "cluster_rates": cluster_rates(partitions, history),
        "history": [s.to_json() for s in history.samples],
        "sample_s": SAMPLE_S,
    }
