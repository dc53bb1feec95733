"""The partition facade: what every handler that touches partition data goes through.

One lookup, `Partitions.leader(topic, partition, current_leader_epoch)`, says whether this node
serves the partition as its leader: the leader's log and epoch (`LeaderPartition`) or the Kafka
error code to answer with (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, and for a client
epoch behind / ahead of the leader's FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH - Kafka's
`Partition.localLogWithEpochOrThrow`; KAFKA_STORAGE_ERROR for a partition whose log is offline
here and NOT_LEADER_OR_FOLLOWER for one whose log is loading, `kafkapy.broker.log_state`). The operations on a leader partition follow:
`append` (Produce: idempotence, KIP-890 transaction verification, acks, and the caller's
high-watermark wait through `wait_replicated`), `read` / `follower_fetch` (Fetch),
`offset_for_timestamp` (ListOffsets), `end_offset_for_epoch` (OffsetForLeaderEpoch),
`delete_records` / `wait_low_watermark` (DeleteRecords) and `producer_state`
(DescribeProducers). Handlers translate between wire messages and this API; none of them looks
at partition roles or the node model.

One node model: a lone node is a quorum of one, so every partition has a role from the
metadata image (`kafkapy.server.cluster.partition_roles`, roles as `kafkapy.broker.partition_role`) and its high watermark follows its
ISR - at once when the leader is the whole ISR.

Hot path: per partition, one lookup (a dict read or two) and the batches handed to the log as
the bytes they arrived in - walked, never decoded into records, never re-encoded. A batch whose
walk may stall the event loop (compressed, or many records: `costly_walk`) is walked in a worker
thread and appended on the loop afterwards, so one compression bomb does not freeze every other
client for the seconds its walk takes.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kafkapy.broker import runtime
from kafkapy.broker.clock import now_ms
from kafkapy.broker.errors import storage_failure
from kafkapy.broker.log_state import LogState, PartitionLogStates
from kafkapy.broker.metadata_store import topic_name_error
from kafkapy.broker.replica_selector import NO_PREFERRED_REPLICA, ReplicaView, select_read_replica
from kafkapy.coordinator.idempotence import BatchMetadata, ProducerBatch, ProducerStateManager
from kafkapy.coordinator.txn import TopicPartition
from kafkapy.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    ProtocolError,
    RecordValidationError,
)
from kafkapy.protocol.records import BatchHeader, iter_batches
from kafkapy.storage.errors import KafkaStorageError, StorageError
from kafkapy.storage.log import AppendResult, PartitionLog, ReadResult, ValidatedBatches

if TYPE_CHECKING:
    from kafkapy.broker.idempotence import ProducerStates
    from kafkapy.broker.metadata_store import TopicStore
    from kafkapy.broker.notify import PartitionWaiters
    from kafkapy.broker.partition_role import PartitionRole
    from kafkapy.broker.ports import ClusterView, ReplicaRoles
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.storage import LogManager

__all__ = [
    "EARLIEST",
    "EARLIEST_LOCAL",
    "LATEST",
    "LATEST_TIERED",
    "MAX_TIMESTAMP",
    "Appended",
    "LeaderPartition",
    "Partitions",
    "PartitionsHost",
    "auto_create",
    "costly_walk",
    "producer_batches",
]

log = logging.getLogger(__name__)

#: ListOffsets special timestamps: EARLIEST_LOCAL -4 (KIP-405, the local log start) and
#: LATEST_TIERED -5 (KIP-1005, the last offset in the remote tier); a topic that is not tiered
#: answers the log start and -1 for them, as Kafka does.
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
_LOW_WATERMARK_RECHECK_S = 0.25
_NONE = ErrorCode.NONE

# Record batch v2 layout: batchLength (int32) at byte 8, attributes (int16, codec in the low 3
# bits) at byte 21, producerId (int64) at byte 43, recordsCount (int32) at byte 57, header 61
# bytes, a batch spans batchLength + 12 bytes. Read directly by `producer_batches`' one-batch
# fast path and by `costly_walk` (see there).
_BATCH_LENGTH = struct.Struct(">i")
_PRODUCER_ID = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")
_RECORDS_COUNT = struct.Struct(">i")
_ATTRIBUTES_AT = 21
_RECORDS_COUNT_AT = 57
_CODEC_MASK = 0x07

INLINE_WALK_RECORDS = 512
"""Uncompressed batches of up to this many records (per partition) are walked on the event
loop: the walk costs 1-3 us per record in Python, a worker-thread hop 50-500 us (the 2-core test
machine, idle to loaded), so below this the hop would cost more than the stall it avoids, and
the stall stays around a millisecond."""

VALIDATION_THREADS = 4
"""Worker threads walking batches at once: each may hold a compressed batch inflated up to the
decompression-bomb cap (64 MiB), so this bounds that memory to 256 MiB; further walks queue."""
_BATCH_LENGTH_AT = 8
_PRODUCER_ID_AT = 43
_BATCH_HEADER_BYTES = 61
_LOG_OVERHEAD = 12


@dataclass(slots=True)
class LeaderPartition:
    """A partition this node leads, as the lookup found it: valid until the caller's next
    `await` (leadership may move then; `append` looks again itself after its own awaits)."""

    topic: str
    partition: int
    log: PartitionLog
    leader_epoch: int
    #: the role the lookup saw (leader state: ISR, follower progress, wake-ups)
    role: PartitionRole

    # the offsets a Fetch answers with even when the read fails (OFFSET_OUT_OF_RANGE, a
    # diverging epoch): read through here so handlers never hold the log itself
    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset


@dataclass(slots=True)
class Appended:
    """The outcome of one partition's `append`: an error (nothing written) or where the batches
    went. `end_offset` is the offset after them; `committed` says the high watermark passed it
    already (else acks=-1 waits for it through `wait_replicated`)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    #: (batch index, message) of refused records (Produce v8+ `record_errors`)
    record_errors: Sequence[tuple[int, str]] = ()
    base_offset: int = -1
    end_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    flush_needed: bool = False
    committed: bool = True
    #: an idempotent producer's retry of batches written before: answered, not written again
    duplicate: bool = False


class TransactionVerifier(Protocol):
    """The transaction coordinator as the produce path asks it (KIP-890 part 1)."""

    def verify(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode: ...


class TransactionRuntime(Protocol):
    async def ready(self) -> TransactionVerifier: ...


class PartitionsHost(Protocol):
    """What the facade uses of the broker it is a view of: topic table, logs, partition roles,
    producer states, the cluster node (image, controller channel, leader lease), counters,
    long-poll wake-ups and the transaction coordinator. Why a Protocol: the broker builds the
    facade, so the facade names what it uses instead of importing it (import-linter: "the
    partition facade and the coordinator runtimes do not import the broker"); `Broker`
    satisfies it structurally, which mypy checks where the broker hands itself over."""

    @property
    def node_id(self) -> int: ...
    @property
    def topics(self) -> TopicStore: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def log_states(self) -> PartitionLogStates: ...
    @property
    def replicas(self) -> ReplicaRoles: ...
    @property
    def producer_states(self) -> ProducerStates: ...
    @property
    def cluster(self) -> ClusterView: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def waiters(self) -> PartitionWaiters: ...
    @property
    def txn_coordinator(self) -> TransactionRuntime: ...

    def auto_create_allowed(self) -> bool: ...
    def partition_log(self, topic: str, partition: int) -> PartitionLog | None: ...
    def after_append(self, topic: str, partition: int, plog: PartitionLog) -> None: ...
    async def wait_replicated(
        self, topic: str, partition: int, end_offset: int, timeout_ms: int
    ) -> ErrorCode: ...


class Partitions:
    """The facade over the broker's logs, partition roles and producer states (module doc).

    The broker's `partitions`; it holds no state of its own (a view of the broker's logs,
    topic table, partition roles, producer states and transaction coordinator) but the bound
    on the worker threads that walk costly batches (`VALIDATION_THREADS`)."""

    def __init__(self, broker: PartitionsHost) -> None:
        self.broker = broker
        self._walkers: runtime.ThreadLimiter | None = None  # made on first use, in the loop

    # -- the lookup -------------------------------------------------------------------------------
    def leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> LeaderPartition | ErrorCode:
        """This node's leader partition, or why a leader-only request may not be served here."""
        broker = self.broker
        refused = self._unservable(topic, partition)
        if refused is not None:
            return refused
        role = broker.replicas.leader_role(topic, partition)
        plog = broker.logs.get(topic, partition) if role is not None else None
        if role is None or plog is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        epoch = role.leader_epoch
        if current_leader_epoch >= 0 and current_leader_epoch != epoch:
            return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        return LeaderPartition(topic, partition, plog, epoch, role)

    def _unservable(self, topic: str, partition: int) -> ErrorCode | None:
        """Why no replica of this partition may be served here whatever its role: an unknown
        partition, or a local log that is offline (KAFKA_STORAGE_ERROR) or still loading
        (NOT_LEADER_OR_FOLLOWER, retriable); None when it may."""
        broker = self.broker
        info = broker.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        states = broker.log_states
        if states and (state := states.state(topic, partition)) is not LogState.READY:
            return ErrorCode.KAFKA_STORAGE_ERROR if state is LogState.OFFLINE else ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def replica(self, topic: str, partition: int, current_leader_epoch: int = -1) -> LeaderPartition | ErrorCode:
        """This node's replica of a partition, leader or follower: what a consumer's Fetch v11+
        may read (KIP-392, see `read_error_on_follower`), or why it may not be served here."""
        broker = self.broker
        refused = self._unservable(topic, partition)
        if refused is not None:
            return refused
        role = broker.replicas.role(topic, partition)
        plog = broker.logs.get(topic, partition) if role is not None else None
        if role is None or plog is None or broker.node_id not in role.replicas:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        epoch = role.leader_epoch
        if current_leader_epoch >= 0 and current_leader_epoch != epoch:
            return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        return LeaderPartition(topic, partition, plog, epoch, role)

    @staticmethod
    def read_error_on_follower(lp: LeaderPartition, fetch_offset: int) -> ErrorCode | None:
        """A consumer reading a follower (KIP-392): OFFSET_OUT_OF_RANGE outside its log,
        OFFSET_NOT_AVAILABLE above its high watermark (the leader's may be ahead: the consumer
        retries, or goes back to the leader), else None."""
        plog = lp.log
        if not plog.log_start_offset <= fetch_offset <= plog.log_end_offset:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        if fetch_offset > plog.high_watermark:
            return ErrorCode.OFFSET_NOT_AVAILABLE
        return None

    def preferred_read_replica(self, lp: LeaderPartition, fetch_offset: int, client_rack: str, listener: str) -> int:
        """The follower a consumer in `client_rack` should read from instead of this leader, or
        NO_PREFERRED_REPLICA (replica_selector.py has the rules; the caller checks that
        `replica.selector.class` is set)."""
        state = lp.role.leader_state
        if state is None or not client_rack:
            return NO_PREFERRED_REPLICA
        brokers = self.broker.cluster.image.brokers
        me = brokers.get(self.broker.node_id)
        leader = ReplicaView(self.broker.node_id, me.rack if me else None, lp.log.log_end_offset)
        followers = []
        for replica in state.isr:
            b = brokers.get(replica)
            if replica == leader.broker_id or b is None or b.fenced or b.endpoint(listener) is None:
                continue
            leo = state.follower_leo(replica)
            if lp.role.follower_log_starts.get(replica, 0) <= fetch_offset <= leo:
                followers.append(ReplicaView(replica, b.rack, leo))
        return select_read_replica(leader, followers, client_rack)

    # -- Produce ----------------------------------------------------------------------------------
    async def writable_topic(self, name: str) -> ErrorCode:
        """NONE when `name` exists (after a creation of it in progress), else its auto-creation
        when `auto.create.topics.enable`, through the controller; answered
        UNKNOWN_TOPIC_OR_PARTITION when it is not published here yet (the client retries once
        its metadata shows the leader)."""
        broker = self.broker
        if broker.topics.get(name) is not None:
            return ErrorCode.NONE
        if broker.auto_create_allowed():
            code = await auto_create(broker, name)
            if code is ErrorCode.NONE and broker.topics.get(name) is not None:
                # created and already published here: append now; a partition led by
                # another broker answers NOT_LEADER_OR_FOLLOWER and the client moves there
                return ErrorCode.NONE
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def _write_error(self, lp: LeaderPartition, required_acks: int) -> ErrorCode | None:
        """Why the leader may not take a write now: its lease ran out (it may have been fenced
        and replaced, `kafkapy.leader.lease.enable`), or acks=-1 with the ISR below
        `min.insync.replicas` (NOT_ENOUGH_REPLICAS, nothing written)."""
        role = lp.role
        lifecycle = self.broker.cluster.lifecycle
        if lifecycle is not None and not lifecycle.holds_lease():
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if (
            required_acks == -1 and role.leader_state is not None
            and not role.leader_state.enough_replicas(self.broker.replicas.min_insync_replicas(lp.topic))
        ):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return None

    async def append(
        self,
        lp: LeaderPartition,
        records: bytes | memoryview,
        *,
        required_acks: int,
        transactional_id: str | None,
        append_ms: int,
    ) -> Appended:
        """Append a client's batches (the bytes as they arrived: offsets and the leader epoch are
        patched in place) at the leader. Plain batches append at once with `append_ms` (the
        LogAppendTime of the request); an idempotent producer's are checked against the
        partition's producer state first (a retried batch is answered with its first offset and
        not written again) and a transactional one against its transaction (KIP-890 part 1,
        checked after the last await so no marker lands between the check and the append).
        The high watermark moves, long polls wake; the caller waits for `committed` if it must."""
        refused = self._write_error(lp, required_acks)
        if refused is not None:
            return Appended(error=refused)
        try:
            idempotent = producer_batches(records)
            if costly_walk(records):
                return await self._append_walked(lp, records, idempotent, transactional_id, append_ms)
            if idempotent:
                return await self._append_idempotent(lp, records, idempotent, transactional_id)
            result = lp.log.append(records, now_ms=append_ms, leader_epoch=lp.leader_epoch)
        except RecordValidationError as e:
            return Appended(error=e.error_code, message=e.reason, record_errors=e.record_errors)
        except ProtocolError as e:
            return Appended(error=e.error_code, message=str(e))
        except StorageError as e:
            code = storage_failure(e, f"Produce to {lp.topic}-{lp.partition}")
            return Appended(error=code, message=str(e))
        return self._appended(lp, len(records), result)

    async def _append_walked(
        self, lp: LeaderPartition, records: bytes | memoryview, idempotent: list[BatchHeader],
        transactional_id: str | None, append_ms: int,
    ) -> Appended:
        """Walk a costly batch in a worker thread (the loop serves other clients meanwhile),
        then append it as `append` does, from a fresh lookup: leadership may have moved or the
        partition been deleted during the walk. The connection's turn is held throughout, so
        its later requests still append after this one; the producer-state checks and the
        offsets are assigned after the walk, on the loop, as Kafka checks sequences after
        LogValidator."""
        rt = runtime.get()
        if self._walkers is None:
            self._walkers = rt.thread_limiter(VALIDATION_THREADS)
        plog = lp.log
        validated = await rt.run_sync_in_thread(plog.validate, records, append_ms, limiter=self._walkers)
        if idempotent:
            return await self._append_idempotent(lp, validated, idempotent, transactional_id)
        again = self._after_awaits(lp)
        if isinstance(again, Appended):
            return again
        result = plog.append(validated, now_ms=now_ms(), leader_epoch=again.leader_epoch)
        return self._appended(again, len(records), result)

    def _after_awaits(self, lp: LeaderPartition) -> LeaderPartition | Appended:
        """The partition looked up again after an await: still led here, by the same log, and
        writable (else the error to answer)."""
        again = self.leader(lp.topic, lp.partition)
        if isinstance(again, ErrorCode):
            return Appended(error=again)
        if again.log is not lp.log:
            raise KafkaStorageError("the partition was deleted meanwhile")
        refused = self._write_error(again, 0)
        return Appended(error=refused) if refused is not None else again

    async def _append_idempotent(
        self, lp: LeaderPartition, records: bytes | memoryview | ValidatedBatches, headers: list[BatchHeader],
        transactional_id: str | None,
    ) -> Appended:
        broker = self.broker
        txn = await broker.txn_coordinator.ready() if any(h.is_transactional for h in headers) else None
        mgr = await broker.producer_states.get((lp.topic, lp.partition), lp.log)
        again = self._after_awaits(lp)  # leadership may have moved during the awaits
        if isinstance(again, Appended):
            return again
        lp = again
        if txn is not None:
            first = headers[0]
            code = txn.verify(transactional_id, first.producer_id, first.producer_epoch,
                              TopicPartition(lp.topic, lp.partition))
            if code is not ErrorCode.NONE:
                return Appended(error=code, message="partition not in the producer's transaction")
        append_ms = now_ms()  # after the awaits above: the clock has moved since the request arrived
        plog = lp.log
        pending = mgr.validate_append(_with_offsets(headers, plog.log_end_offset), append_ms)
        if isinstance(pending, BatchMetadata):  # a retry of a written batch
            end = pending.last_offset + 1
            return Appended(base_offset=pending.first_offset, end_offset=end,
                            log_start_offset=plog.log_start_offset, committed=plog.high_watermark >= end,
                            duplicate=True)
        # no await from validation to commit: nothing else can append in between
        result = plog.append(records, now_ms=append_ms, leader_epoch=lp.leader_epoch)
        mgr.complete_append(pending)
        return self._appended(lp, _size(records), result)

    def _appended(self, lp: LeaderPartition, size: int, result: AppendResult) -> Appended:
        broker = self.broker
        broker.after_append(lp.topic, lp.partition, lp.log)
        base, end = result.base_offset, result.last_offset + 1
        broker.stats.produced(lp.topic, size, end - base)
        return Appended(_NONE, None, (), base, end, result.log_append_time_ms, result.log_start_offset,
                        result.flush_needed, lp.log.high_watermark >= end)

    async def wait_replicated(self, waits: list[tuple[str, int, int]], timeout_ms: int) -> list[ErrorCode]:
        """acks=-1: each (topic, partition, end offset) waits for its high watermark, all within
        one `timeout_ms` (as Kafka's delayed produce): NONE, REQUEST_TIMED_OUT,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank under the minimum meanwhile) or
        NOT_LEADER_OR_FOLLOWER (leadership moved)."""
        deadline = runtime.get().current_time() + max(timeout_ms, 0) / 1000
        codes = []
        for topic, partition, end in waits:
            left_ms = max(int((deadline - runtime.get().current_time()) * 1000), 0)
            codes.append(await self.broker.wait_replicated(topic, partition, end, left_ms))
        return codes

    async def flush(self, partitions: list[tuple[str, int]]) -> None:
        """`flush.messages` asked for an fsync before the acknowledgement."""
        broker = self.broker
        for topic, partition in partitions:
            plog = broker.partition_log(topic, partition)
            if plog is not None:
                try:
                    started = time.perf_counter()
                    await runtime.get().run_sync_in_thread(plog.flush)
                    broker.stats.log_flush_ms.observe((time.perf_counter() - started) * 1000)
                except StorageError:
                    log.exception("flush of %s-%d failed", topic, partition)

    # -- Fetch ------------------------------------------------------------------------------------
    def read(
        self, lp: LeaderPartition, fetch_offset: int, max_bytes: int, *, read_committed: bool, follower: bool
    ) -> ReadResult:
        """Whole batches from `fetch_offset` (at least one if any, KIP-74): consumers below the
        high watermark (read_committed: the last stable offset), followers up to the log end.
        Raises OffsetOutOfRangeError / StorageError."""
        plog = lp.log
        if follower:
            max_offset = plog.log_end_offset
        else:
            max_offset = plog.last_stable_offset if read_committed else plog.high_watermark
        return plog.read(fetch_offset, max_bytes, max_offset=max_offset)

    @staticmethod
    def aborted_transactions(lp: LeaderPartition, fetch_offset: int, last_stable_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the transactions aborted in [fetch_offset,
        last_stable_offset): a read_committed consumer drops their records (KIP-98)."""
        return [(e.producer_id, e.first_offset)
                for e in lp.log.aborted_transactions(fetch_offset, last_stable_offset)]

    def follower_fetch(
        self, lp: LeaderPartition, replica_id: int, fetch_offset: int, last_fetched_epoch: int,
        log_start_offset: int, *, report: bool,
    ) -> tuple[int, int] | ErrorCode | None:
        """A follower's fetch: the diverging epoch (epoch, end offset) it must truncate to first
        (KIP-279; `last_fetched_epoch` -1: not checked), else None - and, when `report`, its
        progress counts for the high watermark and the ISR (once per request).

        REPLICA_NOT_AVAILABLE, as Kafka's leader answers a replica it does not know yet (its
        `NotAssignedReplicaException`): a broker that applied a reassignment adding it before
        the leader did must fetch again, not be served. Served, it would catch up while the
        leader ignored its progress, then stay idle in its fetch session at the leader's end,
        never reported again and never added to the ISR."""
        plog = lp.log
        state = lp.role.leader_state
        if state is not None and not state.is_follower(replica_id):
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if last_fetched_epoch >= 0:
            epoch, end = plog.leader_epochs.end_offset_for(last_fetched_epoch, plog.log_end_offset)
            if epoch < last_fetched_epoch or end < fetch_offset:
                return epoch, end
        if report:
            self.broker.replicas.on_follower_fetch(lp.role, replica_id, fetch_offset, plog, log_start_offset)
        return None

    async def load_stable_offset(self, topic: str, partition: int) -> None:
        """read_committed reads stop at the last stable offset, which the partition's producer
        state sets: load it first (once; after a restart this is what finds open transactions)."""
        plog = self.broker.partition_log(topic, partition)
        if plog is not None:
            await self.broker.producer_states.ensure_loaded((topic, partition), plog)

    # -- ListOffsets, OffsetForLeaderEpoch ---------------------------------------------------------
    async def offset_for_timestamp(
        self, lp: LeaderPartition, timestamp: int, *, read_committed: bool
    ) -> tuple[int, int]:
        """ListOffsets: (offset, timestamp) for LATEST / EARLIEST / MAX_TIMESTAMP or a timestamp,
        (-1, -1) when none is visible (at or past the HW, read_committed the LSO). ValueError
        for an unknown special timestamp; StorageError."""
        plog = lp.log
        if read_committed:  # its producer state sets the LSO
            await self.broker.producer_states.ensure_loaded((lp.topic, lp.partition), plog)
        limit = plog.last_stable_offset if read_committed else plog.high_watermark
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1
        if timestamp == LATEST_TIERED:
            return -1, -1
        if timestamp == LATEST:
            return limit, -1
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset(limit)
            return (found[0], found[1]) if found is not None else (-1, -1)
        if timestamp < 0:
            raise ValueError(f"unknown special timestamp {timestamp}")
        hit = plog.offset_for_timestamp(timestamp)
        if hit is None or hit[0] >= limit:
            return -1, -1
        return hit

    def end_offset_for_epoch(self, lp: LeaderPartition, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: the largest epoch <= `epoch` and where it ended (the start of
        the next epoch, or the log end for the latest); (-1, -1) for an epoch unknown here."""
        return lp.log.leader_epochs.end_offset_for(epoch, lp.log.log_end_offset)

    # -- DeleteRecords, DescribeProducers ----------------------------------------------------------
    def delete_records(self, lp: LeaderPartition, offset: int) -> int:
        """Move the log start to `offset`; the new log start. Raises StorageError
        (OFFSET_OUT_OF_RANGE above the HW)."""
        start = lp.log.delete_records_before(offset)
        self.broker.waiters.notify((lp.topic, lp.partition))  # followers' long polls too
        return start

    async def wait_low_watermark(
        self, topic: str, partition: int, offset: int, deadline: float
    ) -> tuple[ErrorCode, int]:
        """(error, low watermark) once every live replica's log start reached `offset`, as
        Kafka's DelayedDeleteRecords, so a fail-over cannot bring the deleted records back:
        REQUEST_TIMED_OUT at `deadline` (trio time), NOT_LEADER_OR_FOLLOWER when leadership
        moves. A leader with no other live replica has its own log start as the low watermark."""
        low = -1
        for _ in range(1_000_000):
            lp = self.leader(topic, partition)
            if isinstance(lp, ErrorCode):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER, low
            low = self._low_watermark(lp.role, lp.log)
            if low >= offset:
                return ErrorCode.NONE, low
            if runtime.get().current_time() >= deadline:
                return ErrorCode.REQUEST_TIMED_OUT, low
            changed = lp.role.changed  # a follower reported a new log start, or the role changed
            # ... or a follower's broker was fenced, which may not touch this partition: look again
            with runtime.get().move_on_at(min(deadline, runtime.get().current_time() + _LOW_WATERMARK_RECHECK_S)):
                await changed.wait()
        return ErrorCode.REQUEST_TIMED_OUT, low

    def _low_watermark(self, role: PartitionRole, plog: PartitionLog) -> int:
        """Kafka's low watermark: the lowest log start over the leader and every replica on a
        live (unfenced) broker, as their fetches report it (-1 until a follower fetched)."""
        broker = self.broker
        low = plog.log_start_offset
        image = broker.cluster.image
        for replica in role.replicas:
            if replica == broker.node_id:
                continue
            reg = image.brokers.get(replica)
            if reg is None or reg.fenced:
                continue
            low = min(low, role.follower_log_starts.get(replica, -1))
        return low

    async def producer_state(self, lp: LeaderPartition) -> ProducerStateManager:
        """The partition's idempotent producers (loaded from the log on first use)."""
        return await self.broker.producer_states.get((lp.topic, lp.partition), lp.log)


async def auto_create(broker: PartitionsHost, name: str) -> ErrorCode:
    """Ask the active controller for `name` with the default partition count and replication
    factor. NONE / TOPIC_ALREADY_EXISTS mean it exists (or will shortly)."""
    if topic_name_error(name) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    from kafkapy.protocol.messages import CreateTopicsRequest  # loads with the first auto-creation

    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1)
        ],
        timeout_ms=30000,
    )
    try:
        response = await broker.cluster.channel.create_topics(request)
    except Exception as exc:  # no controller yet, ...: the client retries
        log.info("auto-creating %s through the controller failed: %s", name, exc)
        return ErrorCode.LEADER_NOT_AVAILABLE
    code = (
        ErrorCode(response.topics[0].error_code)
        if response.topics
        else ErrorCode.UNKNOWN_SERVER_ERROR
    )
    return ErrorCode.NONE if code is ErrorCode.TOPIC_ALREADY_EXISTS else code


def producer_batches(records: bytes | memoryview) -> list[BatchHeader]:
    """The batch headers when the batches carry a producer id (idempotent producer), else [].

    Per batch, never per record; malformed input is left for the log's own validation. Fast path
    for the common case of one batch without a producer id (what a non-idempotent client sends
    per partition): one read of its producerId field instead of parsing the header, which the
    log then parses again (a tenth of the handler's time with 1,000 one-batch partitions)."""
    size = len(records)
    if size >= _BATCH_HEADER_BYTES:
        (length,) = _BATCH_LENGTH.unpack_from(records, _BATCH_LENGTH_AT)
        if length + _LOG_OVERHEAD == size and _PRODUCER_ID.unpack_from(records, _PRODUCER_ID_AT)[0] < 0:
            return []
    try:
        headers = [h for _, h in iter_batches(records)]
    except ProtocolError:
        return []
    if not any(h.producer_id >= 0 for h in headers):
        return []
    for h in headers:
        if h.is_control:
            raise InvalidRecordError("clients may not produce control batches")
    return headers


def costly_walk(records: bytes | memoryview) -> bool:
    """Whether validating `records` should leave the event loop: a compressed batch (what it
    inflates to, up to the bomb cap, is unknown until inflated) or more than
    `INLINE_WALK_RECORDS` records, counted from the headers (the walk's cost follows the record
    count, which it enforces). Bytes that do not frame as batches are left to the log, which
    refuses them before walking anything."""
    size = len(records)
    pos = count = 0
    while size - pos >= _BATCH_HEADER_BYTES:
        if _ATTRIBUTES.unpack_from(records, pos + _ATTRIBUTES_AT)[0] & _CODEC_MASK:
            return True
        count += max(_RECORDS_COUNT.unpack_from(records, pos + _RECORDS_COUNT_AT)[0], 0)
        (length,) = _BATCH_LENGTH.unpack_from(records, pos + _BATCH_LENGTH_AT)
        if length <= 0:
            break
        pos += length + _LOG_OVERHEAD
    return count > INLINE_WALK_RECORDS


def _size(records: bytes | memoryview | ValidatedBatches) -> int:
    return len(records.data) if isinstance(records, ValidatedBatches) else len(records)


def _with_offsets(headers: list[BatchHeader], next_offset: int) -> list[ProducerBatch]:
    """As the log will number them: consecutively from its end offset."""
    batches = []
    for h in headers:
        batches.append(ProducerBatch.from_header(h, base_offset=next_offset))
        next_offset += h.last_offset_delta + 1
    return batches

