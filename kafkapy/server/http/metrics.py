"""`/metrics`: the broker's Prometheus metrics, named as Kafka's JMX metrics come out of the
Prometheus JMX exporter with Kafka's usual rules (lower case, `kafka_<domain>_<type>_<name>`,
`PerSec` meters as `_total` counters, `Value` gauges bare): so dashboards and alerts written for
Kafka work unchanged where kafkapy has the metric. Per-group lag is named as kafka_exporter names
it (`kafka_consumergroup_lag`), since Kafka itself has no such metric.

Why prometheus-client: the exposition format (escaping, histogram series, OpenMetrics when a
scraper asks for it) and metric families come from the reference client library instead of
being hand-rolled; tests parse what we serve with its own text parser. Its metric objects are
not used on the hot path: `BrokerCollector.collect()` reads `BrokerStats` (plain counters the
request path bumps) and the views of `kafkapy.server.http.views` (gauges computed now), once per
scrape, on the trio thread.

Not here yet: per-client quotas and throttle times (kafkapy has no quotas), request/response
sizes, purgatory sizes, network processor idle ratios (no such threads).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from kafkapy.broker.stats import Histogram
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.http.views import (
    GroupView,
    PartitionView,
    cluster_view,
    group_views,
    offline_logs,
    partition_views,
    transaction_states,
)

if TYPE_CHECKING:
    from kafkapy.server.http.host import ServedNode

__all__ = ["BrokerCollector", "MetricsEndpoint", "Snapshot"]


def _counter(name: str, doc: str, labels: list[str], values: Iterable[tuple[tuple[str, ...], float]]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for label_values, value in values:
        family.add_metric(list(label_values), value)
    return family


def _gauge(name: str, doc: str, value: float | None = None, labels: list[str] | None = None) -> GaugeMetricFamily:
    if labels is None:
        return GaugeMetricFamily(name, doc, value=value if value is not None else 0)
    return GaugeMetricFamily(name, doc, labels=labels)


def _histogram(
    name: str, doc: str, labels: list[str], hists: dict[Any, tuple[list[tuple[str, int]], float]]
) -> HistogramMetricFamily:
    """`hists`: label value(s) -> (cumulative buckets, sum), as `Histogram` gives them."""
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key, (buckets, total) in sorted(hists.items()):
        values = list(key) if isinstance(key, tuple) else [str(key)]
        family.add_metric(values, buckets, total)
    return family


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


@dataclass(slots=True)
class Snapshot:
    """Copies of everything one scrape reports, taken on the trio thread (cheap: dict copies and
    one pass over partitions and groups); the metric families are built from it elsewhere."""

    node_id: int
    counters: dict[str, dict[Any, int]]
    histograms: dict[str, dict[Any, tuple[list[tuple[str, int]], float]]]
    scalars: dict[str, int]
    connections: dict[str, int]
    partitions: list[PartitionView]
    cluster: dict[str, Any]
    brokers: dict[str, int]
    groups: list[GroupView]
    transactions: dict[str, int]
    fetch_sessions: tuple[int, int, int]
    #: per data dir: (uncleanable partitions, their uncleaned bytes, offline partition logs)
    log_dirs: dict[str, tuple[int, int, int]]
    #: the remote tier (KIP-405), per topic: (copy lag bytes, copy lag segments, remote bytes);
    #: and the remote log manager's totals; empty without tiering
    remote_topics: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    remote_totals: dict[str, int] = field(default_factory=dict)


def _log_dirs(server: ServedNode) -> dict[str, tuple[int, int, int]]:
    """Every data dir of the broker, with its uncleanable partitions, their uncleaned bytes and
    its offline partition logs (zeros included: a dashboard sees the dir before it fails)."""
    broker = server.broker
    uncleanable = broker.logs.uncleanable.per_data_dir(int(time.time() * 1000))
    offline: dict[str, int] = defaultdict(int)
    for o in offline_logs(broker):
        offline[o.data_dir] += 1
    out = {str(d): (0, 0, 0) for d in broker.logs.data_dirs}
    for path, (count, size) in uncleanable.items():
        out[str(path)] = (count, size, 0)
    for name, n in offline.items():
        count, size, _ = out.get(name, (0, 0, 0))
        out[name] = (count, size, n)
    return out


def _hists(table: dict[Any, Histogram]) -> dict[Any, tuple[list[tuple[str, int]], float]]:
    return {key: (h.cumulative(), h.sum) for key, h in table.items()}


class BrokerCollector:
    """The metric families of one server (see the module doc): `snapshot()` on the trio thread,
    `families(snapshot)` anywhere (a worker thread when serving /metrics)."""

    def __init__(self, server: ServedNode) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        """The Collector protocol (all on the calling thread)."""
        yield from self.families(self.snapshot())

    def snapshot(self) -> Snapshot:
        server = self.server
        broker = server.broker
        stats = broker.stats
        connections = {b.listener.name: 0 for b in server.bound}
        for conn in server.connections:
            name = conn.state.listener_name
            connections[name] = connections.get(name, 0) + 1
        registered = broker.cluster.image.brokers
        cache = broker.fetch_sessions
        return Snapshot(
            node_id=broker.node_id,
            counters={
                "messages_in": dict(stats.messages_in),
                "bytes_in": dict(stats.bytes_in),
                "bytes_out": dict(stats.bytes_out),
                "replication_bytes_out": dict(stats.replication_bytes_out),
                "follower_bytes_out": dict(stats.follower_bytes_out),
                "remote_fetch_bytes": dict(stats.remote_fetch_bytes),
                "remote_fetch_requests": dict(stats.remote_fetch_requests),
                "remote_fetch_errors": dict(stats.remote_fetch_errors),
                "requests": dict(stats.requests),
                "errors": dict(stats.errors),
                "connections_created": dict(stats.connections_created),
                "connections_closed": dict(stats.connections_closed),
                "authentications": dict(stats.authentications),
                "non_kafka_connections": dict(stats.non_kafka_connections),
                "transactions_completed": dict(stats.transactions_completed),
            },
            histograms={
                "total_time_ms": _hists(stats.total_time_ms),
                "queue_time_ms": _hists(stats.queue_time_ms),
                "log_flush_ms": _hists({(): stats.log_flush_ms}),
                "raft_commit_latency_ms": _hists({(): stats.raft_commit_latency_ms}),
            },
            scalars={"isr_shrinks": stats.isr_shrinks, "isr_expands": stats.isr_expands,
                     "offline_replicas": len(broker.log_states.offline()),
                     "loading_replicas": broker.log_states.loading_count(),
                     "max_broker_partitions": broker.config.get_int("max.broker.partitions")},
            connections=connections,
            partitions=partition_views(broker),
            cluster=cluster_view(server),
            brokers={"fenced": sum(1 for b in registered.values() if b.fenced), "all": len(registered)},
            groups=group_views(broker),
            transactions=transaction_states(broker),
            fetch_sessions=(len(cache), cache.partitions_cached(), cache.evictions),
            log_dirs=_log_dirs(server),
            **_remote_tier(server),
        )

    def families(self, snap: Snapshot) -> list[Metric]:
        out: list[Metric] = []
        for part in (
            _topic_metrics, _request_metrics, _socket_metrics, _partition_metrics,
            _controller_metrics, _log_metrics, _group_metrics, _transaction_metrics,
            _fetch_session_metrics, _remote_metrics,
        ):
            out.extend(part(snap))
        return out


def _sorted_counter(
    name: str, doc: str, labels: list[str], table: dict[Any, int]
) -> CounterMetricFamily:
    def key_of(k: Any) -> tuple[str, ...]:
        return tuple(str(x) for x in k) if isinstance(k, tuple) else (str(k),)

    return _counter(name, doc, labels, sorted((key_of(k), v) for k, v in table.items()))


def _topic_metrics(snap: Snapshot) -> Iterator[Metric]:
    c = snap.counters
    for name, key, doc in (
        ("messagesin", "messages_in", "Messages appended by produce requests"),
        ("bytesin", "bytes_in", "Record batch bytes appended by produce requests"),
        ("bytesout", "bytes_out", "Record bytes returned to consumer fetches"),
        ("replicationbytesout", "replication_bytes_out", "Record bytes returned to follower fetches"),
        ("remotefetchbytes", "remote_fetch_bytes", "Record bytes read from the remote tier for fetches"),
        ("remotefetchrequests", "remote_fetch_requests", "Fetches of a partition served from the remote tier"),
        ("remotefetcherrors", "remote_fetch_errors", "Fetches from the remote tier that failed"),
    ):
        yield _sorted_counter(f"kafka_server_brokertopicmetrics_{name}", doc, ["topic"], c[key])
    yield _sorted_counter(
        "kafkapy_server_brokertopicmetrics_followerbytesout",
        "Record bytes returned to consumer fetches by this broker as a follower (KIP-392)",
        ["topic"], c["follower_bytes_out"],
    )


def _remote_tier(server: ServedNode) -> dict[str, Any]:
    """The remote log manager's figures for the snapshot (nothing without tiering)."""
    manager = server.broker.remote_log
    if manager is None:
        return {}
    lag = manager.copier_lag_by_topic()
    remote = manager.remote_bytes_by_topic()
    topics = {t: (lag[t].bytes if t in lag else 0, lag[t].segments if t in lag else 0,
                  remote.get(t, 0)) for t in sorted(set(lag) | set(remote))}
    return {"remote_topics": topics, "remote_totals": asdict(manager.counters)}


def _remote_metrics(snap: Snapshot) -> Iterator[Metric]:
    """Kafka's tiered-storage BrokerTopicMetrics (RemoteCopyLagBytes, RemoteCopyLagSegments,
    RemoteLogSizeBytes) per topic, and the copier's totals."""
    if not snap.remote_totals:
        return
    labels = ["topic"]
    gauges = [
        _gauge("kafka_server_brokertopicmetrics_remotecopylagbytes",
               "Bytes of rolled segments not copied to the remote tier yet", labels=labels),
        _gauge("kafka_server_brokertopicmetrics_remotecopylagsegments",
               "Rolled segments not copied to the remote tier yet", labels=labels),
        _gauge("kafka_server_brokertopicmetrics_remotelogsizebytes",
               "Bytes of the topic held by the remote tier", labels=labels),
    ]
    for topic, values in snap.remote_topics.items():
        for gauge, value in zip(gauges, values, strict=True):
            gauge.add_metric([topic], value)
    yield from gauges
    totals = snap.remote_totals
    for name, key, doc in (
        ("remotecopybytes", "copied_bytes", "Segment bytes copied to the remote tier"),
        ("remotecopyerrors", "copy_failures", "Failed copies to the remote tier"),
        ("remotedeleteerrors", "delete_failures", "Failed deletions of remote segments"),
    ):
        yield _counter(f"kafka_server_brokertopicmetrics_{name}", doc, [], [((), totals[key])])


def _request_metrics(snap: Snapshot) -> Iterator[Metric]:
    c, h = snap.counters, snap.histograms
    yield _sorted_counter(
        "kafka_network_requestmetrics_requests", "Requests handled, by API and version",
        ["request", "version"], c["requests"],
    )
    yield _counter(
        "kafka_network_requestmetrics_errors",
        "Error codes in responses (every partition/group element; NONE included, as Kafka counts)",
        ["request", "error"],
        sorted(((api, _error_name(code)), n) for (api, code), n in c["errors"].items()),
    )
    yield _histogram(
        "kafka_network_requestmetrics_totaltimems",
        "Request time (ms) from the request being read to its response being ready",
        ["request"], h["total_time_ms"],
    )
    yield _histogram(
        "kafka_network_requestmetrics_requestqueuetimems",
        "Time (ms) a request waited for its connection's turn (requests of one connection "
        "are handled in order)",
        ["request"], h["queue_time_ms"],
    )


def _socket_metrics(snap: Snapshot) -> Iterator[Metric]:
    c = snap.counters
    count = _gauge("kafka_server_socket_server_metrics_connection_count", "Open connections", labels=["listener"])
    for listener, n in sorted(snap.connections.items()):
        count.add_metric([listener], n)
    yield count
    yield _sorted_counter(
        "kafka_server_socket_server_metrics_connection_creation", "Connections accepted",
        ["listener"], c["connections_created"],
    )
    yield _sorted_counter(
        "kafka_server_socket_server_metrics_connection_close", "Connections closed",
        ["listener"], c["connections_closed"],
    )
    auth = c["authentications"]
    for outcome, ok in (("successful", True), ("failed", False)):
        yield _sorted_counter(
            f"kafka_server_socket_server_metrics_{outcome}_authentication",
            f"{outcome.capitalize()} SASL authentications", ["listener", "mechanism"],
            {(lst, mech): n for (lst, mech, good), n in auth.items() if good is ok},
        )
    yield _sorted_counter(
        "kafkapy_non_kafka_connections",
        "Connections closed because the client spoke another protocol (HTTP, TLS on a plaintext listener)",
        ["listener", "protocol"], c["non_kafka_connections"],
    )


def _partition_metrics(snap: Snapshot) -> Iterator[Metric]:
    node = snap.node_id
    local = [v for v in snap.partitions if node in v.replicas]
    led = [v for v in snap.partitions if v.leader == node]
    yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker", len(local))
    yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads", len(led))
    yield _gauge(
        "kafkapy_broker_partition_budget",
        "max.broker.partitions: partition replicas this broker may hold (KIP-578)",
        snap.scalars["max_broker_partitions"],
    )
    yield _gauge(
        "kafkapy_broker_partition_budget_used_ratio",
        "Partition replicas on this broker / max.broker.partitions",
        len(local) / max(1, snap.scalars["max_broker_partitions"]),
    )
    yield _gauge(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Led partitions whose ISR is smaller than their replica set",
        sum(v.under_replicated for v in led),
    )
    yield _gauge(
        "kafka_server_replicamanager_underminisrpartitioncount",
        "Led partitions whose ISR is smaller than min.insync.replicas",
        sum(v.under_min_isr for v in led),
    )
    offline, loading = snap.scalars["offline_replicas"], snap.scalars["loading_replicas"]
    yield _gauge("kafka_server_replicamanager_offlinereplicacount", "Local replicas whose log is offline", offline)
    states = _gauge("kafkapy_partition_log_state", "Local replicas by log state", labels=["state"])
    for name, count in (("ready", max(len(local) - offline - loading, 0)), ("loading", loading), ("offline", offline)):
        states.add_metric([name], count)
    yield states
    yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks committed", value=snap.scalars["isr_shrinks"])
    yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expands committed", value=snap.scalars["isr_expands"])


def _controller_metrics(snap: Snapshot) -> Iterator[Metric]:
    view = snap.cluster
    active = bool(view["active_controller"])
    yield _gauge(
        "kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, else 0", int(active),
    )
    if active:  # Kafka reports the cluster-wide figures on the active controller only
        views = snap.partitions
        yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader", sum(v.offline for v in views))
        yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster", len(views))
        yield _gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster", len({v.topic for v in views}))
        fenced = snap.brokers["fenced"]
        yield _gauge("kafka_controller_kafkacontroller_fencedbrokercount", "Registered brokers that are fenced", fenced)
        yield _gauge("kafka_controller_kafkacontroller_activebrokercount", "Registered brokers that are unfenced", snap.brokers["all"] - fenced)
    quorum = view["quorum"]
    if quorum is not None:
        yield _gauge("kafka_server_raft_metrics_current_leader", "The Raft leader's node id (-1: none known)", quorum["leader_id"])
        yield _gauge("kafka_server_raft_metrics_current_epoch", "The current Raft epoch", quorum["epoch"])
        yield _gauge("kafka_server_raft_metrics_high_watermark", "The Raft high watermark", quorum["high_watermark"])
        yield _gauge("kafka_server_raft_metrics_log_end_offset", "Metadata applied by this node (image offset)", quorum["metadata_offset"])
        state = _gauge("kafka_server_raft_metrics_current_state", "1 for this node's Raft role", labels=["state"])
        state.add_metric([quorum["state"]], 1)
        yield state
        yield _histogram(
            "kafka_server_raft_metrics_commit_latency_ms",
            "Time (ms) from proposing metadata records to their commit, on the active controller",
            [], snap.histograms["raft_commit_latency_ms"],
        )


def _log_metrics(snap: Snapshot) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    size = _gauge("kafka_log_log_size", "Bytes in the partition's log segments", labels=labels)
    segments = _gauge("kafka_log_log_numlogsegments", "Segments of the partition's log", labels=labels)
    end = _gauge("kafka_log_log_logendoffset", "The partition's log end offset", labels=labels)
    start = _gauge("kafka_log_log_logstartoffset", "The partition's log start offset", labels=labels)
    for v in snap.partitions:
        if not v.local:
            continue
        values = [v.topic, str(v.partition)]
        size.add_metric(values, v.size_bytes)
        segments.add_metric(values, v.segments)
        end.add_metric(values, v.log_end_offset)
        start.add_metric(values, v.log_start_offset)
    yield from (size, segments, end, start)
    yield _histogram(
        "kafka_log_logflushstats_logflushrateandtimems", "Time (ms) of each log fsync", [],
        snap.histograms["log_flush_ms"],
    )
    yield from _log_dir_metrics(snap)


def _log_dir_metrics(snap: Snapshot) -> Iterator[Metric]:
    """Kafka's per-log-dir cleaner gauges (`uncleanable-partitions-count`,
    `uncleanable-bytes`), and this node's offline partition logs per data dir."""
    labels = ["logDirectory"]
    count = _gauge("kafka_log_logcleanermanager_uncleanable_partitions_count",
                   "Partitions the log cleaner gave up on", labels=labels)
    size = _gauge("kafka_log_logcleanermanager_uncleanable_bytes",
                  "Uncleaned bytes of the uncleanable partitions", labels=labels)
    offline = _gauge("kafkapy_log_offline_partition_logs",
                     "Partition logs offline (not opened at start-up, or a write failed)", labels=labels)
    for data_dir, (n, dirty, down) in sorted(snap.log_dirs.items()):
        count.add_metric([data_dir], n)
        size.add_metric([data_dir], dirty)
        offline.add_metric([data_dir], down)
    yield from (count, size, offline)


def _group_metrics(snap: Snapshot) -> Iterator[Metric]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for g in snap.groups:
        counts[(g.protocol, g.state)] += 1
    count = _gauge("kafka_server_group_coordinator_metrics_group_count", "Groups by protocol and state", labels=["protocol", "state"])
    for (protocol, state), n in sorted(counts.items()):
        count.add_metric([protocol, state], n)
    yield count
    members = _gauge("kafka_consumergroup_members", "Members of the group", labels=["consumergroup"])
    lag = _gauge("kafka_consumergroup_lag", "High watermark minus committed offset", labels=["consumergroup", "topic", "partition"])
    current = _gauge("kafka_consumergroup_current_offset", "Committed offset", labels=["consumergroup", "topic", "partition"])
    total = _gauge("kafka_consumergroup_lag_sum", "Lag of the group over its partitions", labels=["consumergroup"])
    for g in snap.groups:
        members.add_metric([g.group_id], len(g.members))
        for o in g.offsets:
            values = [g.group_id, o.topic, str(o.partition)]
            current.add_metric(values, o.committed)
            if o.lag is not None:
                lag.add_metric(values, o.lag)
        total.add_metric([g.group_id], g.lag)
    yield from (members, lag, current, total)


def _transaction_metrics(snap: Snapshot) -> Iterator[Metric]:
    states = _gauge("kafka_coordinator_transaction_transactions", "Transactional ids by state", labels=["state"])
    for state, n in sorted(snap.transactions.items()):
        states.add_metric([state], n)
    yield states
    yield _sorted_counter(
        "kafka_coordinator_transaction_completed", "Transactions completed (markers written), by result",
        ["result"], snap.counters["transactions_completed"],
    )


def _fetch_session_metrics(snap: Snapshot) -> Iterator[Metric]:
    sessions, partitions, evictions = snap.fetch_sessions
    yield _gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions", "Incremental fetch sessions", sessions)
    yield _gauge(
        "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", "Partitions held by fetch sessions", partitions,
    )
    yield CounterMetricFamily(
        "kafka_server_fetchsessioncache_incrementalfetchsessionevictions", "Fetch sessions evicted", value=evictions,
    )


class _Collected(Collector):
    """Metric families already collected, for an encoder running in a worker thread."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


class MetricsEndpoint:
    """What /metrics serves for one server: its collector and the process collector."""

    def __init__(self, server: ServedNode) -> None:
        self.collector = BrokerCollector(server)
        self.process = ProcessCollector(registry=None)

    async def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition (body, content type) in the format the scraper's Accept asks for.

        Only `snapshot()` runs on the trio thread that owns the broker's state; building the
        families and formatting them (most of a scrape's cost: ~4/5 with 1,000 partitions) run
        in a worker thread, which gives the GIL back to the Kafka path every switch interval
        instead of holding the event loop for all of it."""
        encoder, content_type = choose_encoder(accept or "")
        snap = self.collector.snapshot()

        def build() -> bytes:
            families = self.collector.families(snap) + list(self.process.collect())
            return encoder(_Collected(families))

        return await trio.to_thread.run_sync(build), content_type
