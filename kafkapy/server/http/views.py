"""Read-only views of a running broker for `/metrics` and the status page, built on demand.

Why on demand: gauges (partition states, log sizes, group lag, quorum) are computed from the
state the broker keeps anyway, at scrape or page-poll time, so the request path pays nothing for
them. Everything here runs on the trio thread (the single owner of that state) and never awaits,
so a view is consistent; the cost is one pass over partitions and groups per call.

The partition table comes from the latest metadata image, for a lone node (a quorum of one)
as for a cluster (every partition of the cluster, with leader, ISR
and replicas as the controller committed them); log figures exist only for replicas on this
node.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkapy.controller.budgets import replicas_per_broker

if TYPE_CHECKING:
    from kafkapy.server.http.host import ServedBroker, ServedNode
    from kafkapy.storage import PartitionLog

__all__ = [
    "BrokerView",
    "GroupView",
    "OfflineLogView",
    "PartitionView",
    "UncleanableView",
    "broker_views",
    "cluster_view",
    "group_views",
    "offline_logs",
    "partition_views",
    "topic_configs",
    "transaction_states",
    "uncleanable_partitions",
]


@dataclass(slots=True)
class PartitionView:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    internal: bool = False
    min_isr: int = 1
    # this node's replica, if it has one
    local: bool = False
    size_bytes: int = 0
    segments: int = 0
    log_start_offset: int = -1
    log_end_offset: int = -1
    high_watermark: int = -1

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def under_min_isr(self) -> bool:
        return len(self.isr) < self.min_isr

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(slots=True)
class BrokerView:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    in_controlled_shutdown: bool = False
    #: partition replicas assigned to the broker (what `max.broker.partitions` caps) and
    #: partitions it leads, from the metadata image
    replicas: int = 0
    leaders: int = 0


@dataclass(slots=True)
class MemberView:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None


@dataclass(slots=True)
class OffsetView:
    topic: str
    partition: int
    committed: int
    end_offset: int  # the partition's high watermark here, -1 when not on this node

    @property
    def lag(self) -> int | None:
        return max(self.end_offset - self.committed, 0) if self.end_offset >= 0 else None


@dataclass(slots=True)
class GroupView:
    group_id: str
    protocol: str  # "classic" or "consumer" (KIP-848)
    state: str
    protocol_type: str = ""
    members: list[MemberView] = field(default_factory=list)
    offsets: list[OffsetView] = field(default_factory=list)

    @property
    def lag(self) -> int:
        return sum(o.lag or 0 for o in self.offsets)


def _min_isr(broker: ServedBroker, configs: dict[str, str]) -> int:
    value = configs.get("min.insync.replicas") or broker.config.get("min.insync.replicas") or "1"
    try:
        return int(value)
    except ValueError:
        return 1


def partition_views(broker: ServedBroker) -> list[PartitionView]:
    """Every partition this node knows of (see the module doc), sorted by topic and partition."""
    out: list[PartitionView] = []
    logs = broker.logs.logs()
    image = broker.cluster.image
    internal = {info.name for info in broker.topics.all() if info.internal}
    for name, topic in sorted(image.topics.items()):
        min_isr = _min_isr(broker, dict(topic.configs))
        for p, part in sorted(topic.partitions.items()):
            view = PartitionView(
                name, p, part.leader, tuple(part.replicas), tuple(part.isr),
                name in internal or name.startswith("__"), min_isr,
            )
            _add_log(view, logs.get((name, p)))
            out.append(view)
    out.sort(key=lambda v: (v.topic, v.partition))
    return out


def _add_log(view: PartitionView, plog: PartitionLog | None) -> None:
    if plog is None or plog.offline:
        return
    view.local = True
    segments = list(plog.segments)
    view.segments = len(segments)
    view.size_bytes = sum(s.size for s in segments)
    view.log_start_offset = plog.log_start_offset
    view.log_end_offset = plog.log_end_offset
    view.high_watermark = plog.high_watermark


def broker_views(broker: ServedBroker) -> list[BrokerView]:
    """The cluster's registered brokers, with their replica and leader counts."""
    cluster = broker.cluster
    out = []
    listener = cluster.config.inter_broker_listener_name
    image = cluster.image
    replicas = replicas_per_broker(image)
    leaders = Counter(p.leader for t in image.topics.values() for p in t.partitions.values())
    for node_id, reg in sorted(image.brokers.items()):
        endpoint = reg.endpoint(listener) or (reg.endpoints[0] if reg.endpoints else None)
        host, port = (endpoint.host, endpoint.port) if endpoint is not None else ("", 0)
        out.append(BrokerView(node_id, host, port, reg.rack, reg.fenced, reg.in_controlled_shutdown,
                              replicas[node_id], leaders[node_id]))
    return out


def cluster_view(server: ServedNode) -> dict[str, Any]:
    """Cluster id, this node, the controller and the Raft quorum as this node sees them."""
    broker = server.broker
    cluster = broker.cluster
    ready, reason = server.readiness()
    view: dict[str, Any] = {
        "cluster_id": broker.cluster_id,
        "node_id": broker.node_id,
        "version": broker.version,
        "mode": "single node" if cluster.config.quorum_of_one else "cluster",
        "ready": ready,
        "not_ready_reason": "" if ready else reason,
        "pid": os.getpid(),
        "listeners": [
            {"name": b.listener.name, "host": b.host, "port": b.port} for b in server.bound
        ],
    }
    raft = cluster.raft
    leader = raft.leader_id
    view["controller_id"] = leader if leader is not None else -1
    view["active_controller"] = cluster.controller is not None and raft.is_leader
    view["quorum"] = {
        "voters": sorted(cluster.config.voters),
        "leader_id": leader if leader is not None else -1,
        "epoch": raft.epoch,
        "high_watermark": raft.high_watermark,
        "state": raft.role.name.lower(),
        "metadata_offset": cluster.image.offset,
    }
    return view


def group_views(broker: ServedBroker) -> list[GroupView]:
    """Groups of the coordinators this node runs, with members and committed offsets; the lag
    of a partition is its high watermark here minus the committed offset (None when the
    partition has no replica on this node)."""
    driver = broker.group_coordinator
    logs = broker.logs.logs()
    out: list[GroupView] = []
    for coordinator in driver.coordinators():
        for listed in coordinator.list_groups():
            view = GroupView(listed.group_id, listed.group_type, listed.state, listed.protocol_type)
            classic = coordinator.groups.get(listed.group_id)
            if classic is not None:
                view.members = [
                    MemberView(m.member_id, m.client_id, m.client_host, m.group_instance_id)
                    for m in classic.members.values()
                ]
            consumer = coordinator.consumer_groups.get(listed.group_id)
            if consumer is not None:
                view.members = [
                    MemberView(member_id, m.client_id, m.client_host, m.instance_id)
                    for member_id, m in consumer.members.items()
                ]
            for tp, value in sorted(coordinator.offsets.get(listed.group_id, {}).items()):
                plog = logs.get((tp.topic, tp.partition))
                end = plog.high_watermark if plog is not None and not plog.offline else -1
                view.offsets.append(OffsetView(tp.topic, tp.partition, value.offset, end))
            out.append(view)
    out.sort(key=lambda g: g.group_id)
    return out


def transaction_states(broker: ServedBroker) -> dict[str, int]:
    """How many transactional ids are in each state (Ongoing, PrepareCommit, ...)."""
    driver = broker.txn_coordinator
    counts: dict[str, int] = {}
    for coordinator in driver.coordinators():
        for md in coordinator.transactions.values():
            counts[md.state.value] = counts.get(md.state.value, 0) + 1
    return counts


def topic_configs(broker: ServedBroker) -> dict[str, dict[str, str]]:
    """Per topic, the configs set on it (its overrides of the broker defaults), as the
    metadata image holds them: what `kafka-configs --describe --entity-type topics` lists as
    non-default."""
    return {name: dict(sorted(t.configs.items())) for name, t in broker.cluster.image.topics.items()}


@dataclass(slots=True)
class UncleanableView:
    """A partition the log cleaner gave up on (Kafka's uncleanable partitions)."""

    topic: str
    partition: int
    data_dir: str
    reason: str
    since_ms: int


@dataclass(slots=True)
class OfflineLogView:
    """A partition log on this node that is offline (`broker.log_states`): it could not be
    opened at start-up, or a write, fsync or metadata change on it failed since."""

    topic: str
    partition: int
    data_dir: str
    reason: str


def uncleanable_partitions(broker: ServedBroker) -> list[UncleanableView]:
    """The uncleanable partitions, by topic and partition."""
    return [
        UncleanableView(tp[0], tp[1], str(u.data_dir), u.reason, u.since_ms)
        for tp, u in sorted(broker.logs.uncleanable.partitions().items())
    ]


def offline_logs(broker: ServedBroker) -> list[OfflineLogView]:
    """The offline partition logs of this node with why, by topic and partition; the data dir
    is where the log is (or was found, for one that could not be opened)."""
    failed = broker.logs.failed_logs()
    logs = broker.logs.logs()
    out = []
    for tp, reason in sorted(broker.log_states.offline().items()):
        plog, error = logs.get(tp), failed.get(tp)
        where = plog.directory.parent if plog is not None else error.path.parent if error else None
        out.append(OfflineLogView(tp[0], tp[1], "" if where is None else str(where), reason))
    return out
