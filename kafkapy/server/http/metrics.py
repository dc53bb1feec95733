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

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.http.views import (
    PartitionView,
    cluster_view,
    group_views,
    partition_views,
    transaction_states,
)
from kafkapy.server.stats import Histogram

if TYPE_CHECKING:
    from kafkapy.server.app import Server

__all__ = ["BrokerCollector", "metrics_registry", "render_metrics"]


def _counter(name: str, doc: str, labels: list[str], values: Iterable[tuple[tuple[str, ...], float]]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for label_values, value in values:
        family.add_metric(list(label_values), value)
    return family


def _gauge(name: str, doc: str, value: float | None = None, labels: list[str] | None = None) -> GaugeMetricFamily:
    if labels is None:
        return GaugeMetricFamily(name, doc, value=value if value is not None else 0)
    return GaugeMetricFamily(name, doc, labels=labels)


def _histogram(name: str, doc: str, labels: list[str], hists: Iterable[tuple[tuple[str, ...], Histogram]]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for label_values, hist in hists:
        family.add_metric(list(label_values), hist.cumulative(), hist.sum)
    return family


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class BrokerCollector:
    """Builds every metric family of one server at scrape time (see the module doc)."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        views = partition_views(self.server.broker)  # one pass over the partitions per scrape
        yield from self._topic_metrics()
        yield from self._request_metrics()
        yield from self._socket_metrics()
        yield from self._partition_metrics(views)
        yield from self._controller_metrics(views)
        yield from self._log_metrics(views)
        yield from self._group_metrics()
        yield from self._transaction_metrics()
        yield from self._fetch_session_metrics()

    def _topic_metrics(self) -> Iterator[Metric]:
        stats = self.server.broker.stats
        for name, table, doc in (
            ("messagesin", stats.messages_in, "Messages appended by produce requests"),
            ("bytesin", stats.bytes_in, "Record batch bytes appended by produce requests"),
            ("bytesout", stats.bytes_out, "Record bytes returned to consumer fetches"),
            ("replicationbytesout", stats.replication_bytes_out, "Record bytes returned to follower fetches"),
        ):
            yield _counter(
                f"kafka_server_brokertopicmetrics_{name}", doc, ["topic"],
                (((topic,), value) for topic, value in sorted(table.items())),
            )

    def _request_metrics(self) -> Iterator[Metric]:
        stats = self.server.broker.stats
        yield _counter(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by API and version",
            ["request", "version"],
            (((api, str(v)), n) for (api, v), n in sorted(stats.requests.items())),
        )
        yield _counter(
            "kafka_network_requestmetrics_errors",
            "Error codes in responses (every partition/group element; NONE included, as Kafka counts)",
            ["request", "error"],
            (((api, _error_name(c)), n) for (api, c), n in sorted(stats.errors.items())),
        )
        yield _histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Request time (ms) from the request being read to its response being ready",
            ["request"],
            (((api,), h) for api, h in sorted(stats.total_time_ms.items())),
        )
        yield _histogram(
            "kafka_network_requestmetrics_requestqueuetimems",
            "Time (ms) a request waited for its connection's turn (requests of one connection "
            "are handled in order)",
            ["request"],
            (((api,), h) for api, h in sorted(stats.queue_time_ms.items())),
        )

    def _socket_metrics(self) -> Iterator[Metric]:
        stats = self.server.broker.stats
        open_count: dict[str, int] = defaultdict(int)
        for b in self.server.bound:
            open_count[b.listener.name] += 0
        for conn in self.server.connections:
            open_count[conn.state.listener_name] += 1
        count = _gauge("kafka_server_socket_server_metrics_connection_count", "Open connections", labels=["listener"])
        for listener, n in sorted(open_count.items()):
            count.add_metric([listener], n)
        yield count
        yield _counter(
            "kafka_server_socket_server_metrics_connection_creation",
            "Connections accepted", ["listener"],
            (((k,), n) for k, n in sorted(stats.connections_created.items())),
        )
        yield _counter(
            "kafka_server_socket_server_metrics_connection_close",
            "Connections closed", ["listener"],
            (((k,), n) for k, n in sorted(stats.connections_closed.items())),
        )
        auth = sorted(stats.authentications.items())
        yield _counter(
            "kafka_server_socket_server_metrics_successful_authentication",
            "Successful SASL authentications", ["listener", "mechanism"],
            (((lst, mech), n) for (lst, mech, ok), n in auth if ok),
        )
        yield _counter(
            "kafka_server_socket_server_metrics_failed_authentication",
            "Failed SASL authentications", ["listener", "mechanism"],
            (((lst, mech), n) for (lst, mech, ok), n in auth if not ok),
        )
        yield _counter(
            "kafkapy_non_kafka_connections",
            "Connections closed because the client spoke another protocol (HTTP, TLS on a plaintext listener)",
            ["listener", "protocol"],
            ((key, n) for key, n in sorted(stats.non_kafka_connections.items())),
        )

    def _partition_metrics(self, views: list[PartitionView]) -> Iterator[Metric]:
        broker = self.server.broker
        node = broker.node_id
        local = [v for v in views if node in v.replicas]
        led = [v for v in views if v.leader == node]
        yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker", len(local))
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads", len(led))
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
        stats = broker.stats
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks committed", value=stats.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expands committed", value=stats.isr_expands)

    def _controller_metrics(self, views: list[PartitionView]) -> Iterator[Metric]:
        server = self.server
        view = cluster_view(server)
        active = bool(view["active_controller"])
        yield _gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, else 0", int(active),
        )
        if active:  # Kafka reports the cluster-wide figures on the active controller only
            yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader", sum(v.offline for v in views))
            yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster", len(views))
            yield _gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster", len({v.topic for v in views}))
            brokers = getattr(getattr(server.broker.cluster, "image", None), "brokers", None)
            if brokers is not None:
                fenced = sum(1 for b in brokers.values() if b.fenced)
                yield _gauge("kafka_controller_kafkacontroller_fencedbrokercount", "Registered brokers that are fenced", fenced)
                yield _gauge("kafka_controller_kafkacontroller_activebrokercount", "Registered brokers that are unfenced", len(brokers) - fenced)
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
                [], [((), server.broker.stats.raft_commit_latency_ms)],
            )

    def _log_metrics(self, views: list[PartitionView]) -> Iterator[Metric]:
        broker = self.server.broker
        size = _gauge("kafka_log_log_size", "Bytes in the partition's log segments", labels=["topic", "partition"])
        segments = _gauge("kafka_log_log_numlogsegments", "Segments of the partition's log", labels=["topic", "partition"])
        end = _gauge("kafka_log_log_logendoffset", "The partition's log end offset", labels=["topic", "partition"])
        start = _gauge("kafka_log_log_logstartoffset", "The partition's log start offset", labels=["topic", "partition"])
        for v in views:
            if not v.local:
                continue
            labels = [v.topic, str(v.partition)]
            size.add_metric(labels, v.size_bytes)
            segments.add_metric(labels, v.segments)
            end.add_metric(labels, v.log_end_offset)
            start.add_metric(labels, v.log_start_offset)
        yield from (size, segments, end, start)
        yield _histogram(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Time (ms) of each log fsync", [], [((), broker.stats.log_flush_ms)],
        )

    def _group_metrics(self) -> Iterator[Metric]:
        groups = group_views(self.server.broker)
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for g in groups:
            counts[(g.protocol, g.state)] += 1
        count = _gauge("kafka_server_group_coordinator_metrics_group_count", "Groups by protocol and state", labels=["protocol", "state"])
        for (protocol, state), n in sorted(counts.items()):
            count.add_metric([protocol, state], n)
        yield count
        members = _gauge("kafka_consumergroup_members", "Members of the group", labels=["consumergroup"])
        lag = _gauge("kafka_consumergroup_lag", "High watermark minus committed offset", labels=["consumergroup", "topic", "partition"])
        current = _gauge("kafka_consumergroup_current_offset", "Committed offset", labels=["consumergroup", "topic", "partition"])
        total = _gauge("kafka_consumergroup_lag_sum", "Lag of the group over its partitions", labels=["consumergroup"])
        for g in groups:
            members.add_metric([g.group_id], len(g.members))
            for o in g.offsets:
                labels = [g.group_id, o.topic, str(o.partition)]
                current.add_metric(labels, o.committed)
                if o.lag is not None:
                    lag.add_metric(labels, o.lag)
            total.add_metric([g.group_id], g.lag)
        yield from (members, lag, current, total)

    def _transaction_metrics(self) -> Iterator[Metric]:
        broker = self.server.broker
        states = _gauge("kafka_coordinator_transaction_transactions", "Transactional ids by state", labels=["state"])
        for state, n in sorted(transaction_states(broker).items()):
            states.add_metric([state], n)
        yield states
        yield _counter(
            "kafka_coordinator_transaction_completed",
            "Transactions completed (markers written), by result", ["result"],
            (((r,), n) for r, n in sorted(broker.stats.transactions_completed.items())),
        )

    def _fetch_session_metrics(self) -> Iterator[Metric]:
        cache = self.server.broker.fetch_sessions
        yield _gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions", "Incremental fetch sessions", len(cache))
        yield _gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions held by fetch sessions", cache.partitions_cached(),
        )
        yield CounterMetricFamily(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "Fetch sessions evicted", value=cache.evictions,
        )


class _Collected(Collector):
    """Metric families already collected, for an encoder running in a worker thread."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def metrics_registry(server: Server) -> CollectorRegistry:
    """A registry of its own per server (several brokers may share a process in tests), with
    the broker's collector and the process collector (CPU, memory, open files)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(server))
    ProcessCollector(registry=registry)
    return registry


async def render_metrics(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The exposition (body, content type) in the format the scraper's Accept asks for.

    The families are collected here, on the trio thread that owns the broker's state; the text
    is formatted in a worker thread - with 1,000 partitions formatting is ~4/5 of a scrape's
    ~150 ms, and in a thread it gives the GIL back to the Kafka path every switch interval
    instead of holding the event loop for all of it."""
    encoder, content_type = choose_encoder(accept or "")
    families = list(registry.collect())
    body = await trio.to_thread.run_sync(encoder, _Collected(families))
    return body, content_type
