"""Transaction markers on the data partitions: writing one here, sending them to the leaders.

Why a module of its own: the coordinator runtime (`txn_driver`) decides *which* markers a
transaction needs and when it is complete; this is the transport underneath, shared with the
WriteTxnMarkers handler - Kafka's TransactionMarkerChannelManager and the partition side of
WriteTxnMarkers.

- `write_marker`: one control batch appended to a partition this broker leads, through the
  partition's producer state (origin COORDINATOR: an older producer epoch or coordinator epoch
  is refused), abort markers with their `.txnindex` entry, a marker on `__consumer_offsets`
  publishing or dropping the producer's pending transactional offsets; cluster mode answers
  once the marker is replicated (acks=all).
- `send_markers`: markers for a set of partitions wherever their leaders are (metadata image):
  local ones by `write_marker`, the others by one WriteTxnMarkers v1 per leader, leaders in
  parallel, on connections of their own (`MarkerPeers`; never the replica fetchers'). A
  request in flight is abandoned (NOT_LEADER_OR_FOLLOWER) as soon as the image moves one of
  its partitions, so the caller re-sends at the new leader at once instead of waiting out a
  hung former leader's request timeout.

Error handling: every failure is an error code per partition (`RETRY_CODES*`: worth another
try; UNKNOWN_TOPIC_OR_PARTITION: the partition was deleted, nothing to mark); connection
failures are logged at WARNING, abandoned requests at INFO.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from kafkapy.broker import runtime
from kafkapy.broker.clock import now_ms
from kafkapy.broker.internal_topics import InternalTopicsHost, partition_leader, wait_replicated
from kafkapy.coordinator.idempotence import (
    AppendOrigin,
    BatchMetadata,
    ControlType,
    ProducerBatch,
)
from kafkapy.coordinator.txn import OFFSETS_TOPIC, TopicPartition
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import build_control_batch, parse_batch_header
from kafkapy.storage.errors import StorageError

if TYPE_CHECKING:
    from kafkapy.broker.partitions import Partitions
    from kafkapy.broker.ports import PeerRequests
    from kafkapy.coordinator.idempotence import ProducerStateManager
    from kafkapy.protocol.messages import WriteTxnMarkersResponse
    from kafkapy.storage import PartitionLog

__all__ = [
    "RETRY_CODES",
    "MarkerHost",
    "MarkerPeers",
    "send_marker",
    "send_markers",
    "write_marker",
]

log = logging.getLogger(__name__)

#: Marker answers that leave the transaction pending for a retry: the partition's storage
#: failed, or its leader moved or could not be reached.
RETRY_CODES = frozenset({
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
})
_MARKER_TIMEOUT_S = 10.0
#: how often a marker in flight checks whether its partitions' leaders moved
_LEADER_CHECK_S = 0.1


class OffsetsMarkerListener(Protocol):
    """The group coordinator as a marker on `__consumer_offsets` concerns it: the producer's
    pending transactional offsets are published or dropped."""

    def on_transaction_marker(
        self, producer_id: int, commit: bool, partition: int | None = None
    ) -> None: ...


class GroupsRuntime(Protocol):
    async def ready(self) -> OffsetsMarkerListener: ...


class MarkerHost(InternalTopicsHost, Protocol):
    """What the marker writer and sender use of the broker they run in, beyond the
    internal-topic helpers': the partition facade (leader lookup, producer state), the append
    bookkeeping, and the group coordinator (markers on `__consumer_offsets`). A Protocol for
    the reason `InternalTopicsHost` gives."""

    @property
    def partitions(self) -> Partitions: ...
    @property
    def group_coordinator(self) -> GroupsRuntime: ...

    def after_append(self, topic: str, partition: int, plog: PartitionLog) -> None: ...


class MarkerPeers:
    """The connections markers travel on: their own, as Kafka's marker channel is, never the
    replica fetchers' (a marker waits for replication, which needs the fetchers' requests to
    flow - queued behind the marker on one pipelined connection they would wait for each
    other until a timeout). Owned by the transaction coordinator's runtime; the pool is made
    on first use."""

    def __init__(self, broker: MarkerHost) -> None:
        self._broker = broker
        self.pool: PeerRequests | None = None

    def get(self) -> PeerRequests:
        if self.pool is None:
            self.pool = self._broker.cluster.new_broker_peers(
                f"kafkapy-txn-markers-{self._broker.node_id}")
        return self.pool

    async def aclose(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.aclose()


async def send_marker(
    broker: MarkerHost, peers: MarkerPeers, tp: TopicPartition, producer_id: int,
    producer_epoch: int, coordinator_epoch: int, commit: bool,
) -> ErrorCode:
    """One partition's marker wherever its leader is (see `send_markers`)."""
    codes = await send_markers(broker, peers, {tp}, producer_id, producer_epoch,
                               coordinator_epoch, commit)
    return codes[tp]


async def send_markers(
    broker: MarkerHost, peers: MarkerPeers, partitions: Iterable[TopicPartition], producer_id: int,
    producer_epoch: int, coordinator_epoch: int, commit: bool,
) -> dict[TopicPartition, ErrorCode]:
    """Markers for `partitions` wherever their leaders are: `write_marker` here, else one
    WriteTxnMarkers v1 per leader named by the metadata image, the leaders in parallel
    (cluster mode). A partition that no longer exists answers UNKNOWN_TOPIC_OR_PARTITION
    (nothing to mark: the caller counts it as done)."""
    out: dict[TopicPartition, ErrorCode] = {}
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        found = partition_leader(broker, tp.topic, tp.partition)
        if found is None:
            log.info("no marker for producer %d on %s-%d: the partition was deleted",
                     producer_id, tp.topic, tp.partition)
            out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif found[0] < 0:
            out[tp] = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            by_leader.setdefault(found[0], []).append(tp)

    async def to_leader(leader: int, tps: list[TopicPartition]) -> None:
        if leader == broker.node_id:
            for tp in tps:
                out[tp] = await write_marker(broker, tp, producer_id, producer_epoch,
                                             coordinator_epoch, commit)
        else:
            out.update(await _remote_markers(broker, peers, leader, tps, producer_id,
                                             producer_epoch, coordinator_epoch, commit))

    async with runtime.get().task_group() as nursery:
        for leader, tps in by_leader.items():
            nursery.start_soon(to_leader, leader, tps)
    return out


async def _remote_markers(
    broker: MarkerHost, marker_peers: MarkerPeers, leader: int, tps: list[TopicPartition],
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
) -> dict[TopicPartition, ErrorCode]:
    """One WriteTxnMarkers to `leader` for `tps`. Abandoned (NOT_LEADER_OR_FOLLOWER, so the
    caller re-sends at once) as soon as the image moves one of the partitions to another
    leader: a hung or dead former leader must not hold the transaction for a request timeout."""
    # the message classes load with the first markers this broker sends
    from kafkapy.protocol.messages import WriteTxnMarkersRequest as W

    peers = marker_peers.get()
    topics: dict[str, list[int]] = {}
    for tp in tps:
        topics.setdefault(tp.topic, []).append(tp.partition)
    request = W(markers=[W.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch,
        topics=[W.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
    )])
    leaders = {tp: partition_leader(broker, tp.topic, tp.partition) for tp in tps}
    response: WriteTxnMarkersResponse | None = None
    codes: dict[TopicPartition, ErrorCode] = {}
    async with runtime.get().task_group() as nursery:

        async def watch_leaders() -> None:
            while True:
                await runtime.get().sleep(_LEADER_CHECK_S)
                moved = [tp for tp in tps
                         if partition_leader(broker, tp.topic, tp.partition) != leaders[tp]]
                if moved:
                    log.info("marker for producer %d to node %d abandoned: %s moved to another "
                             "leader", producer_id, leader,
                             ", ".join(f"{tp.topic}-{tp.partition}" for tp in moved))
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(watch_leaders)
        try:
            response = await peers.request(
                leader, ApiKey.WRITE_TXN_MARKERS, 1, request, timeout_s=_MARKER_TIMEOUT_S
            )
        except Exception as exc:  # PeerError: unreachable or timed out; the caller retries
            log.warning("marker for producer %d to node %d failed: %s", producer_id, leader, exc)
            codes = dict.fromkeys(tps, ErrorCode.NETWORK_EXCEPTION)
        nursery.cancel_scope.cancel()
    if response is None:
        return codes or dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    for marker in response.markers:
        for topic in marker.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if tp in leaders:
                    codes[tp] = ErrorCode(p.error_code)
    return {tp: codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in tps}


async def write_marker(
    broker: MarkerHost, tp: TopicPartition, producer_id: int, producer_epoch: int,
    coordinator_epoch: int, commit: bool,
) -> ErrorCode:
    """Append one transaction marker to a partition (WriteTxnMarkers, internal or from the
    wire). A partition that no longer exists counts as done (UNKNOWN_TOPIC_OR_PARTITION). Only
    the partition's leader writes it (else NOT_LEADER_OR_FOLLOWER, so the coordinator retries
    at the new leader), and it is answered once replicated (acks=all)."""
    partitions = broker.partitions
    lp = partitions.leader(tp.topic, tp.partition)
    if isinstance(lp, ErrorCode):
        return lp
    plog = lp.log
    try:
        mgr = await partitions.producer_state(lp)
    except (StorageError, ProtocolError) as exc:
        log.error("producer state of %s-%d unavailable: %s", tp.topic, tp.partition, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    groups = await broker.group_coordinator.ready() if tp.topic == OFFSETS_TOPIC else None
    again = partitions.leader(tp.topic, tp.partition)  # leadership may have moved meanwhile
    if isinstance(again, ErrorCode):
        return again
    if again.log is not plog:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # no await from here to the append: nothing else appends to the partition in between
    done = _append_marker(plog, mgr, again.leader_epoch, tp, producer_id, producer_epoch,
                          coordinator_epoch, commit)
    if done is not None:  # refused, or written before
        return done
    broker.after_append(tp.topic, tp.partition, plog)
    if groups is not None:
        groups.on_transaction_marker(producer_id, commit, tp.partition)
    if plog.high_watermark >= plog.log_end_offset:  # the leader alone is the ISR
        return ErrorCode.NONE
    return await wait_replicated(broker, tp.topic, tp.partition, plog.log_end_offset)


def _append_marker(
    plog: PartitionLog, mgr: ProducerStateManager, leader_epoch: int, tp: TopicPartition,
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
) -> ErrorCode | None:
    """The marker's control batch, checked against the producer state (an older producer or
    coordinator epoch is refused), appended with its `.txnindex` entries. None: appended now;
    NONE: it was written before (nothing more to do); any other code: why it was refused."""
    now = now_ms()
    data = bytearray(build_control_batch(
        commit, producer_id=producer_id, producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch, timestamp_ms=now,
    ))
    batch = ProducerBatch.from_header(
        parse_batch_header(data), base_offset=plog.log_end_offset,
        control=ControlType.COMMIT if commit else ControlType.ABORT,
        coordinator_epoch=coordinator_epoch,
    )
    try:
        pending = mgr.validate_append([batch], now, AppendOrigin.COORDINATOR)
        if isinstance(pending, BatchMetadata):  # only client batches are duplicates
            return ErrorCode.NONE
        plog.append(data, now_ms=now, leader_epoch=leader_epoch, from_client=False)
        result = mgr.complete_append(pending)
        for a in result.aborted:
            plog.append_aborted_txn(a.producer_id, a.first_offset, a.last_offset,
                                    a.last_stable_offset)
    except ProtocolError as exc:  # ProducerStateError, or a marker the log refuses
        log.warning("marker for producer %d refused by %s-%d: %s", producer_id, tp.topic,
                    tp.partition, exc)
        return exc.error_code
    except StorageError as exc:
        log.error("marker for producer %d on %s-%d failed: %s", producer_id, tp.topic,
                  tp.partition, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return None
