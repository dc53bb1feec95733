"""The status page's data: a short history of throughput and group lag, and `/api/status`.

Why a history on the server: the page's charts show the last minutes as soon as it opens (not
only from when the browser started polling). `History.run` samples every `SAMPLE_S` into a
ring of `HISTORY_SAMPLES` (10 minutes): cumulative message/byte counters from `BrokerStats`
(the page derives rates from consecutive samples), every group's total lag, and each partition's
log end offset, from which the per-partition and per-topic message rates of the tables come.
It runs only while the HTTP listener is on, on the trio thread, one pass over partitions and
groups per sample.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from kafkapy.server.http.views import (
    PartitionView,
    broker_views,
    cluster_view,
    group_views,
    partition_views,
)

if TYPE_CHECKING:
    from kafkapy.server.http.host import ServedNode

__all__ = ["HISTORY_SAMPLES", "SAMPLE_S", "History", "status_json"]

SAMPLE_S = 2.0
HISTORY_SAMPLES = 300


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
        self._last_ends: dict[tuple[str, int], int] = {}
        self._last_time = 0.0

    def sample(self) -> None:
        stats = self.server.broker.stats
        now = time.monotonic()
        ends = {
            (v.topic, v.partition): v.log_end_offset
            for v in partition_views(self.server.broker)
            if v.local
        }
        if self._last_time:
            elapsed = max(now - self._last_time, 1e-3)
            self.partition_rates = {
                key: max(end - self._last_ends.get(key, end), 0) / elapsed
                for key, end in ends.items()
            }
        self._last_ends, self._last_time = ends, now
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


def topic_rows(partitions: list[PartitionView], rates: dict[tuple[str, int], float]) -> list[dict[str, Any]]:
    """Per topic: partition count, bytes and messages/s on this node, internal or not."""
    topics: dict[str, dict[str, Any]] = {}
    for v in partitions:
        row = topics.setdefault(
            v.topic,
            {"name": v.topic, "partitions": 0, "size_bytes": 0, "messages": 0,
             "messages_per_s": 0.0, "internal": v.internal, "under_replicated": 0},
        )
        row["partitions"] += 1
        row["size_bytes"] += v.size_bytes
        row["messages_per_s"] += rates.get((v.topic, v.partition), 0.0)
        row["under_replicated"] += int(v.under_replicated)
        if v.local:
            row["messages"] += max(v.log_end_offset - v.log_start_offset, 0)
    return list(topics.values())


def status_json(server: ServedNode, history: History, *, summary: bool = False) -> dict[str, Any]:
    """Everything the page shows, as JSON. `summary`: without the per-partition rows (what the
    page's script polls every 2 s: it needs only counts, groups and the history)."""
    broker = server.broker
    partitions = partition_views(broker)
    rates = history.partition_rates
    return {
        "cluster": cluster_view(server),
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
             "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown}
            for b in broker_views(broker)
        ],
        "connections": len(server.connections),
        "topics": topic_rows(partitions, rates),
        "partition_count": len(partitions),
        "under_replicated": sum(v.under_replicated for v in partitions),
        "partitions": [] if summary else [
            {"topic": v.topic, "partition": v.partition, "leader": v.leader,
             "replicas": list(v.replicas), "isr": list(v.isr), "local": v.local,
             "size_bytes": v.size_bytes, "segments": v.segments,
             "log_start_offset": v.log_start_offset, "log_end_offset": v.log_end_offset,
             "high_watermark": v.high_watermark,
             "messages_per_s": rates.get((v.topic, v.partition), 0.0)}
            for v in partitions
        ],
        "groups": [
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
            for g in group_views(broker)
        ],
        "rates": history.rates(),
        "history": [s.to_json() for s in history.samples],
        "sample_s": SAMPLE_S,
    }
