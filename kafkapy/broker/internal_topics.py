"""The internal topics' building blocks under `coordinator_runtime` (`__consumer_offsets`,
`__transaction_state`), and the coordinator lookups FindCoordinator and the marker writer make.

Why a module of its own: creating an internal topic, finding a partition's leader and reading
a log's batches from its start are the same whatever the records mean, and some of it
(`coordinator_node`, `partition_leader`) is used by handlers that have no runtime of their own.

The topics are created through the active controller (`ensure_cluster_topic`; on a quorum of
one, in-process), the coordinator of a key is the leader of its partition in the metadata
image (`coordinator_node`), and each runtime keeps one coordinator per partition this broker
leads (`OwnedPartitions`): loaded when the partition's leadership arrives (`on_become_leader`),
dropped when it leaves. Appends are answered only once replicated (`wait_replicated`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from kafkapy.broker import runtime
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.records import BatchHeader, iter_batches
from kafkapy.storage import PartitionLog

if TYPE_CHECKING:
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.broker.idempotence import ProducerIds
    from kafkapy.broker.ports import ClusterView
    from kafkapy.controller.image import TopicImage
    from kafkapy.protocol.messages import CreateTopicsResponse

__all__ = [
    "InternalTopicsHost",
    "OwnedPartitions",
    "RoleListener",
    "coordinator_node",
    "ensure_cluster_topic",
    "ensure_producer_ids",
    "log_batches",
    "partition_count",
    "partition_exists",
    "partition_leader",
    "wait_replicated",
]

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20


def log_batches(
    plog: PartitionLog, start: int | None = None, end: int | None = None
) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(chunk, position, header) of every batch from the log start to the log end as they
    were at the call, read a chunk at a time (the load/replay path of a coordinator).
    `start`/`end` narrow that to the batches holding offsets in [start, end) (cluster mode
    loads in two steps and reverts to the high watermark).

    A chunk that does not parse raises `ProtocolError` from the iteration, after the batches
    before it were yielded; the caller decides whether that ends the load.
    """
    offset = plog.log_start_offset if start is None else max(start, plog.log_start_offset)
    end = plog.log_end_offset if end is None else min(end, plog.log_end_offset)
    while offset < end:
        data = plog.read_bytes(offset, _READ_CHUNK)
        progressed = False
        for pos, header in iter_batches(data):
            if header.base_offset >= end:
                return
            progressed = True
            offset = header.last_offset + 1
            yield data, pos, header
        if not progressed:
            break


# -- ownership and the metadata image -----------------------------------------------------------

C = TypeVar("C")

#: How long a coordinator append may wait for its replicas (Kafka's offsets.commit.timeout.ms).
REPLICATION_TIMEOUT_MS = 5_000


class RoleListener(Protocol):
    """Told when this broker starts or stops leading a partition (the coordinator runtimes,
    for their internal topic's partitions)."""

    def on_become_leader(self, topic: str, partition: int, leader_epoch: int) -> None: ...
    def on_become_follower(self, topic: str, partition: int, leader_epoch: int) -> None: ...


class InternalTopicsHost(Protocol):
    """What the helpers below (and the coordinator runtimes built on them) use of the broker
    they run in. Why a Protocol: the broker builds the runtimes, so they name what they use
    instead of importing it (import-linter: "the partition facade and the coordinator runtimes
    do not import the broker"); `Broker` satisfies it structurally, which mypy checks where the
    broker hands itself over."""

    @property
    def node_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def cluster(self) -> ClusterView: ...
    @property
    def endpoints(self) -> dict[str, tuple[str, int]]: ...
    @property
    def producer_ids(self) -> ProducerIds: ...

    async def wait_replicated(
        self, topic: str, partition: int, end_offset: int, timeout_ms: int
    ) -> ErrorCode: ...


def _topic(cluster: ClusterView, name: str) -> TopicImage | None:
    return cluster.image.topics.get(name)


def partition_leader(broker: InternalTopicsHost, topic: str, partition: int) -> tuple[int, int] | None:
    """(leader id, leader epoch) of a partition in the image; None if it does not exist."""
    t = _topic(broker.cluster, topic)
    p = None if t is None else t.partitions.get(partition)
    return None if p is None else (p.leader, p.leader_epoch)


def partition_count(broker: InternalTopicsHost, topic: str) -> int | None:
    t = _topic(broker.cluster, topic)
    return None if t is None else len(t.partitions)


def partition_exists(broker: InternalTopicsHost, topic: str, partition: int) -> bool:
    """Does the partition exist (anywhere in the cluster)?"""
    return partition_leader(broker, topic, partition) is not None


def broker_endpoint(broker: InternalTopicsHost, node_id: int, listener: str) -> tuple[str, int] | None:
    """Where node `node_id` serves `listener` (clients are sent to the listener they came in
    on, as Kafka does); None if it is unknown or fenced."""
    reg = broker.cluster.image.brokers.get(node_id)
    if reg is None or reg.fenced:
        return None
    chosen = reg.endpoint(listener)
    if chosen is None and node_id == broker.node_id and listener in broker.endpoints:
        return broker.endpoints[listener]
    if chosen is None:
        return None
    return chosen.host, chosen.port


def coordinator_node(
    broker: InternalTopicsHost, topic: str, partition: int, listener: str
) -> tuple[ErrorCode, int, str, int]:
    """FindCoordinator's answer for the key whose partition is `topic`-`partition`: the
    partition's leader and its endpoint, or COORDINATOR_NOT_AVAILABLE (no leader, unknown
    endpoint, or a leader whose connection this node just saw fail - `ClusterNode.seen_gone`)
    with Kafka's placeholders."""
    found = partition_leader(broker, topic, partition)
    if found is None or found[0] < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    if found[0] != broker.node_id and broker.cluster.seen_gone(found[0]):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1  # its process just died: see seen_gone
    where = broker_endpoint(broker, found[0], listener)
    if where is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, found[0], where[0], where[1]


async def ensure_cluster_topic(
    broker: InternalTopicsHost, name: str, partitions: int, configs: dict[str, str], rf_key: str
) -> bool:
    """Is the internal topic in the image? If not, ask the controller to create
    it (TOPIC_ALREADY_EXISTS is fine; the caller keeps it to one request at a time) and answer
    whether it is there now - if not, the caller answers COORDINATOR_NOT_AVAILABLE and the
    client retries, as with Kafka.

    Replication factor: `rf_key` (3 by default) capped at the number of registered brokers,
    so a two-node cluster still gets its coordinators (while a registered broker is fenced the
    controller refuses and the lookup is retried, as Kafka waits for enough live brokers)."""
    cluster = broker.cluster
    image = cluster.image
    if name in image.topics:
        return True
    registered = len(image.brokers)
    wanted = broker.config.get(rf_key)
    rf = max(1, min(int(wanted) if wanted else 3, registered))
    from kafkapy.protocol.messages import CreateTopicsRequest  # loads with the first creation

    request = CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in configs.items()],
        )],
        timeout_ms=REPLICATION_TIMEOUT_MS,
    )
    try:
        response: CreateTopicsResponse = await cluster.channel.create_topics(request)
        code = ErrorCode(response.topics[0].error_code) if response.topics else ErrorCode.NONE
        if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.warning("creating %s through the controller failed: %s", name, code.name)
        else:
            log.info("asked the controller for %s (%d partitions, rf %d)", name, partitions, rf)
    except Exception as exc:  # controller unreachable, no leader yet, ...: the client retries
        log.warning("creating %s through the controller failed: %s", name, exc)
    return _topic(cluster, name) is not None


async def wait_replicated(broker: InternalTopicsHost, topic: str, partition: int, end_offset: int) -> ErrorCode:
    """Wait until the HW passes `end_offset` (acks=all for coordinator writes; at once when
    the leader is the whole ISR)."""
    try:
        return ErrorCode(
            await broker.wait_replicated(topic, partition, end_offset, REPLICATION_TIMEOUT_MS)
        )
    except Exception as exc:
        log.warning("waiting for %s-%d to replicate failed: %s", topic, partition, exc)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER


@dataclass(slots=True)
class _Owned(Generic[C]):
    leader_epoch: int
    coordinator: C | None = None  # None while loading
    loaded: runtime.Event = field(default_factory=runtime.new_event)


class OwnedPartitions(Generic[C]):
    """The internal-topic partitions this broker leads, each with its own coordinator.

    A partition is LOADING from `begin_load` until `finish_load` installs its coordinator; a
    load is tied to the leader epoch it started for, so a load overtaken by a newer
    leadership (or by losing it) is discarded instead of installed.
    """

    def __init__(self) -> None:
        self._parts: dict[int, _Owned[C]] = {}

    def lookup(self, partition: int) -> C | ErrorCode:
        """The partition's coordinator, or NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        owned = self._parts.get(partition)
        if owned is None:
            return ErrorCode.NOT_COORDINATOR
        if owned.coordinator is None:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return owned.coordinator

    def begin_load(self, partition: int, leader_epoch: int) -> bool:
        """True if a load must start (a new leadership, or a newer epoch of it)."""
        owned = self._parts.get(partition)
        if owned is not None and owned.leader_epoch >= leader_epoch:
            return False
        if owned is not None:
            owned.loaded.set()
        self._parts[partition] = _Owned(leader_epoch)
        return True

    def is_current(self, partition: int, leader_epoch: int) -> bool:
        owned = self._parts.get(partition)
        return owned is not None and owned.leader_epoch == leader_epoch

    def finish_load(self, partition: int, leader_epoch: int, coordinator: C) -> bool:
        """Install a loaded coordinator; False (nothing installed) if the load is stale."""
        owned = self._parts.get(partition)
        if owned is None or owned.leader_epoch != leader_epoch or owned.coordinator is not None:
            return False
        owned.coordinator = coordinator
        owned.loaded.set()
        return True

    def drop(self, partition: int) -> C | None:
        """Stop leading the partition; returns its coordinator (None if it was loading)."""
        owned = self._parts.pop(partition, None)
        if owned is None:
            return None
        owned.loaded.set()
        return owned.coordinator

    def leader_epoch(self, partition: int) -> int | None:
        owned = self._parts.get(partition)
        return None if owned is None else owned.leader_epoch

    def loaded(self) -> dict[int, C]:
        return {p: o.coordinator for p, o in self._parts.items() if o.coordinator is not None}

    def loading(self) -> list[int]:
        return [p for p, o in self._parts.items() if o.coordinator is None]

    async def wait_loaded(self, partition: int) -> None:
        owned = self._parts.get(partition)
        if owned is not None:
            await owned.loaded.wait()


async def ensure_producer_ids(broker: InternalTopicsHost, count: int = 1) -> ErrorCode:
    """Make `count` calls of `broker.producer_ids.allocate()` safe now: the ids come from
    controller blocks (AllocateProducerIds, unique across the cluster; the next block
    is fetched when 90% of the current one is used); while no block can be had the answer is
    COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
    ids = broker.producer_ids
    await ids.prefetch()  # first: nothing may await between `ensure_available` and the use
    try:
        await ids.ensure_available(count)
    except Exception as exc:
        log.warning("no producer id block from the controller: %s", exc)
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return ErrorCode.NONE
