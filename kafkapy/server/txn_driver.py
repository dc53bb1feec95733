"""The trio runtime of the transaction coordinator: `__transaction_state`, markers and timers.

Why a driver: `TransactionCoordinator` is a plain state machine (operations return records,
responses and marker actions; state changes only by replaying records), so this module supplies
what it cannot have: the log, the clock and the partitions the markers go to. It follows the
runtime contract of docs/transactions.md section 2 - for one operation: append its records to
`__transaction_state` (one batch per partition, the normal log path), replay them, then answer
and write its markers. Operation, append and replay run without an await in between, so on the
one trio thread operations never interleave and no lock is needed.

Markers are written before the EndTxn answer (Kafka answers after the Prepare* record and writes
markers asynchronously): on one node they are local appends, and a client that commits and then
reads with read_committed sees its data at once. A marker goes through the partition's producer
state (origin COORDINATOR: an older epoch or coordinator epoch is refused), abort markers add a
`.txnindex` entry, and a marker on `__consumer_offsets` publishes or drops the producer's pending
TxnOffsetCommit offsets. When every partition has its marker, `complete_markers` moves the
transaction to Complete*. A failed marker write is retried by the timer task
(`pending_markers`), as is a batch of markers interrupted by a crash (`load_complete` at start).

Resource handling: one `TxnDriver` per `Broker` (`await txn_driver(broker)`), created and loaded
on first use: `__transaction_state` (compacted, `transaction.state.log.num.partitions`) is made
lazily, its logs in a worker thread, so brokers without transactional producers never pay for
it; an existing topic is read in a worker thread and replayed. `run_txn_driver(broker)` is the
server's timer task (transaction timeouts, transactional-id expiry, marker retries); cancelling
it stops it. Producer ids come from `broker.producer_ids`, which idempotent producers share, so
the two kinds never collide.

Error handling: an unreadable record while loading is logged and skipped; a failing
`__transaction_state` append answers the operation's `error_on_write_failure` and replays
nothing; a marker a partition refuses (fenced epoch) is logged and counts as written, since
retrying cannot succeed and the transaction must not hang.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import trio

from kafkapy.coordinator.idempotence import (
    AppendOrigin,
    BatchMetadata,
    ControlType,
    ProducerBatch,
)
from kafkapy.coordinator.txn import (
    OFFSETS_TOPIC,
    CoordinatorResult,
    TopicPartition,
    TransactionCoordinator,
    TxnLogRecord,
    TxnState,
    WriteTxnMarkers,
)
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import (
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    parse_batch_header,
)
from kafkapy.server.broker import LEADER_EPOCH, Broker, now_ms
from kafkapy.server.group_driver import group_driver
from kafkapy.server.internal_topics import (
    create_internal_logs,
    internal_partition_log,
    log_batches,
    register_internal_topic,
)
from kafkapy.server.metadata_store import TopicInfo
from kafkapy.storage import PartitionLog
from kafkapy.storage.errors import KafkaStorageError, StorageError

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "Outcome",
    "TxnDriver",
    "run_txn_driver",
    "txn_driver",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

TRANSACTION_STATE_TOPIC = "__transaction_state"
#: How often outstanding markers are retried and ids checked for expiry at the latest.
_RETRY_S = 1.0
_EXPIRY_CHECK_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """An operation's answer: `response` if its records were written, else `error`."""

    written: bool
    response: T
    error: ErrorCode = ErrorCode.NONE


def _read_records(broker: Broker, info: TopicInfo) -> list[tuple[bytes, bytes | None]]:
    """Every keyed record of `__transaction_state`, partition by partition (worker thread)."""
    out: list[tuple[bytes, bytes | None]] = []
    for partition in range(info.partitions):
        plog = broker.logs.get(info.name, partition)
        if plog is None:
            continue
        try:
            for data, pos, header in log_batches(plog):
                if header.is_control:
                    continue
                try:
                    records = decode_records(data, pos, header)
                except ProtocolError as exc:
                    log.warning("skipping unreadable %s batch: %s", info.name, exc)
                    continue
                out.extend((r.key, r.value) for r in records if r.key is not None)
        except ProtocolError as exc:  # recovery validated the log; never expected
            log.error("%s-%d unreadable: %s", info.name, partition, exc)
    return out


class TxnDriver:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions = max(cfg.get_int("transaction.state.log.num.partitions"), 1)
        self.coordinator = TransactionCoordinator(
            num_partitions=self.num_partitions,
            offsets_topic_partitions=max(cfg.get_int("offsets.topic.num.partitions"), 1),
            max_transaction_timeout_ms=cfg.get_int("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=cfg.get_int("transactional.id.expiration.ms"),
            allocate_producer_id=broker.producer_ids.allocate,
        )
        self.loaded = False
        self.loaded_event = trio.Event()
        self._loading: trio.Event | None = None
        self._changed = trio.Event()
        self._writing: set[str] = set()  # transactional ids whose markers are being written
        self._next_expiry_ms = 0

    # -- start-up ------------------------------------------------------------------------

    async def ensure_loaded(self) -> None:
        """Create or load `__transaction_state` once; concurrent callers wait for the first."""
        while not self.loaded:
            if self._loading is not None:
                await self._loading.wait()
                continue
            self._loading = trio.Event()
            try:
                info = self.broker.topics.get(TRANSACTION_STATE_TOPIC)
                if info is None:
                    info = self._register_topic()
                    await create_internal_logs(self.broker, info)
                else:
                    self.num_partitions = info.partitions
                    self.coordinator.num_partitions = info.partitions
                    records = await trio.to_thread.run_sync(_read_records, self.broker, info)
                    for key, value in records:
                        try:
                            self.coordinator.replay(key, value)
                        except ProtocolError as exc:
                            log.warning("skipping unreadable %s record: %s", info.name, exc)
                    log.info("transaction coordinator loaded %d records: %d transactional ids",
                             len(records), len(self.coordinator.transactions))
                result = self.coordinator.load_complete(now_ms())
                self.loaded = True
                self.loaded_event.set()
            finally:
                self._loading.set()
                self._loading = None
            outcome = self.commit(result)
            if outcome.written:
                await self.write_markers(result.markers)

    def _register_topic(self) -> TopicInfo:
        segment_bytes = self.broker.config.get("transaction.state.log.segment.bytes") or "104857600"
        return register_internal_topic(
            self.broker, TRANSACTION_STATE_TOPIC, self.num_partitions,
            {"cleanup.policy": "compact", "segment.bytes": segment_bytes},
        )

    # -- operations ----------------------------------------------------------------------

    def commit(self, result: CoordinatorResult[T]) -> Outcome[T]:
        """Append the records, then replay them (no await: operations never interleave)."""
        try:
            self._append(result.records)
        except (StorageError, ProtocolError) as exc:
            log.error("appending to %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
            return Outcome(False, result.response, result.error_on_write_failure)
        for record in result.records:
            self.coordinator.replay(record.key, record.value)
        if result.records:
            self._changed.set()
        return Outcome(True, result.response)

    async def run(self, result: CoordinatorResult[T]) -> Outcome[T]:
        """`commit`, then write the operation's markers (before the caller answers)."""
        outcome = self.commit(result)
        if outcome.written and result.markers:
            await self.write_markers(result.markers)
        return outcome

    def _append(self, records: Iterable[TxnLogRecord]) -> None:
        by_partition: dict[int, list[Record]] = {}
        for r in records:
            batch = by_partition.setdefault(r.partition, [])
            batch.append(Record(len(batch), 0, r.key, r.value, []))
        now = now_ms()
        for partition, batch_records in by_partition.items():
            plog = self._state_log(partition)
            plog.append(build_batch(batch_records, base_timestamp=now), now_ms=now,
                        leader_epoch=LEADER_EPOCH)
            self.broker.after_append(TRANSACTION_STATE_TOPIC, partition, plog)

    def _state_log(self, partition: int) -> PartitionLog:
        plog = internal_partition_log(self.broker, TRANSACTION_STATE_TOPIC, partition)
        if plog is None:
            raise KafkaStorageError(f"{TRANSACTION_STATE_TOPIC}-{partition} does not exist")
        return plog

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
               tp: TopicPartition) -> ErrorCode:
        """KIP-890 part 1, before a producer's first transactional write to a partition: is the
        partition in that producer's ongoing transaction? Errors as the produce path answers
        them (PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH since KIP-588)."""
        if not transactional_id:
            return ErrorCode.INVALID_TXN_STATE
        result = self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, [tp], now_ms(), verify_only=True
        )
        code = result.response.get(tp, ErrorCode.INVALID_TXN_STATE)
        return ErrorCode.INVALID_PRODUCER_EPOCH if code is ErrorCode.PRODUCER_FENCED else code

    # -- markers -------------------------------------------------------------------------

    async def write_markers(self, actions: Iterable[WriteTxnMarkers]) -> None:
        """Write each action's control batches, then complete the transaction; what fails stays
        pending for the timer task's retry."""
        for action in actions:
            if action.transactional_id in self._writing:
                continue  # another task is on it
            self._writing.add(action.transactional_id)
            try:
                done = True
                for tp in sorted(action.partitions):
                    code = await write_marker(
                        self.broker, tp, action.producer_id, action.producer_epoch,
                        action.coordinator_epoch, action.commit,
                    )
                    if code in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_ENOUGH_REPLICAS):
                        done = False
                if done:
                    self.commit(self.coordinator.complete_markers(
                        action.transactional_id, action.producer_id, action.producer_epoch,
                        now_ms(),
                    ))
            finally:
                self._writing.discard(action.transactional_id)

    # -- timers --------------------------------------------------------------------------

    def _next_deadline_ms(self) -> int:
        """Earliest transaction timeout, the next expiry check, or a retry of pending markers."""
        now = now_ms()
        deadline = max(self._next_expiry_ms, now)
        for md in self.coordinator.transactions.values():
            if md.state is TxnState.ONGOING:
                deadline = min(deadline, md.txn_start_timestamp + md.txn_timeout_ms + 1)
            elif md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                deadline = min(deadline, now + int(_RETRY_S * 1000))
        return deadline

    async def tick(self) -> None:
        """Run the timers that are due (the timer task calls this; tests may too)."""
        now = now_ms()
        result = self.coordinator.abort_timed_out_transactions(now)
        if result.response:
            log.info("aborting timed-out transactions: %s", ", ".join(result.response))
        await self.run(result)
        if now >= self._next_expiry_ms:
            self._next_expiry_ms = now + min(
                _EXPIRY_CHECK_MS, self.coordinator.transactional_id_expiration_ms
            )
            expired = self.coordinator.expire_transactional_ids(now)
            if expired.response:
                log.info("transactional ids expired: %s", ", ".join(expired.response))
            self.commit(expired)
        pending = [m for m in self.coordinator.pending_markers()
                   if m.transactional_id not in self._writing]
        if pending:
            await self.write_markers(pending)

    async def run_timers(self) -> None:
        """Fire timeouts, expiry and marker retries at their deadlines, forever."""
        await self.ensure_loaded()
        self._next_expiry_ms = now_ms() + min(
            _EXPIRY_CHECK_MS, self.coordinator.transactional_id_expiration_ms
        )
        while True:
            self._changed = trio.Event()
            delay_s = (self._next_deadline_ms() - now_ms()) / 1000
            if delay_s > 0:
                with trio.move_on_after(delay_s):
                    await self._changed.wait()
                continue  # something changed or the deadline passed: recompute
            try:
                await self.tick()
            except Exception:
                log.exception("transaction coordinator timers failed")
                await trio.sleep(_RETRY_S)


async def write_marker(
    broker: Broker, tp: TopicPartition, producer_id: int, producer_epoch: int,
    coordinator_epoch: int, commit: bool,
) -> ErrorCode:
    """Append one transaction marker to a partition (WriteTxnMarkers, internal or from the
    wire). A partition that no longer exists counts as done (UNKNOWN_TOPIC_OR_PARTITION)."""
    key = (tp.topic, tp.partition)
    plog = broker.partition_log(tp.topic, tp.partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        mgr = await broker.producer_states.get(key, plog)
    except (StorageError, ProtocolError) as exc:
        log.error("producer state of %s-%d unavailable: %s", tp.topic, tp.partition, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    groups = await group_driver(broker) if tp.topic == OFFSETS_TOPIC else None
    if broker.partition_log(tp.topic, tp.partition) is not plog:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # no await from here to the end: nothing else appends to the partition in between
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
        plog.append(data, now_ms=now, leader_epoch=LEADER_EPOCH, from_client=False)
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
    broker.after_append(tp.topic, tp.partition, plog)
    if groups is not None:
        groups.on_transaction_marker(producer_id, commit)
    return ErrorCode.NONE


_DRIVERS: weakref.WeakKeyDictionary[Broker, TxnDriver] = weakref.WeakKeyDictionary()


def _driver(broker: Broker) -> TxnDriver:
    driver = _DRIVERS.get(broker)
    if driver is None:
        driver = _DRIVERS[broker] = TxnDriver(broker)
    return driver


async def txn_driver(broker: Broker) -> TxnDriver:
    """The broker's transaction coordinator runtime, created and loaded on first use."""
    driver = _driver(broker)
    await driver.ensure_loaded()
    return driver


async def run_txn_driver(broker: Broker) -> None:
    """The server's long-lived timer task. It loads the coordinator at start-up only if
    `__transaction_state` exists (so a restarted broker aborts or completes what was in flight
    without waiting for a client); otherwise it waits until the first transactional request
    loads it."""
    driver = _driver(broker)
    if broker.topics.get(TRANSACTION_STATE_TOPIC) is None:
        await driver.loaded_event.wait()
    while True:  # a failure here must not take the server down
        try:
            await driver.run_timers()
        except Exception:
            log.exception("transaction coordinator runtime failed; retrying")
            await trio.sleep(_RETRY_S)
