"""The trio runtime of the transaction coordinator: `__transaction_state`, markers and timers.

Why a driver: `TransactionCoordinator` is a plain state machine (operations return records,
responses and marker actions; state changes only by replaying records), so this module supplies
what it cannot have: the log, the clock and the partitions the markers go to. It follows the
runtime contract of docs/transactions.md section 2 - for one operation: append its records to
`__transaction_state` (one batch per partition, the normal log path), replay them, then answer
and write its markers. Operation, append and replay run without an await in between, so on the
one trio thread operations never interleave and no lock is needed.

On one node markers are written before the EndTxn answer (Kafka answers after the Prepare*
record and writes markers asynchronously): they are local appends, and a client that commits and
then reads with read_committed sees its data at once. How a marker is written and sent is
`txn_markers`. When every partition has its marker, `complete_markers` moves the transaction to
Complete*. A failed marker write is retried by the timer task (`pending_markers`, a second
later), as is a batch of markers interrupted by a crash (`load_complete` at start).

Resource handling: one `TxnDriver` per `Broker` (`await txn_driver(broker)`), created and loaded
on first use: `__transaction_state` (compacted, `transaction.state.log.num.partitions`) is made
lazily, its logs in a worker thread, so brokers without transactional producers never pay for
it; an existing topic is read in a worker thread and replayed. `run_txn_driver(broker)` is the
server's timer task (transaction timeouts, transactional-id expiry, marker retries); cancelling
it stops it. Producer ids come from `broker.producer_ids`, which idempotent producers share, so
the two kinds never collide.

Partitioned mode (cluster mode, docs/cluster.md; also selectable on one node for tests): one
`TransactionCoordinator` per `__transaction_state` partition this broker leads (`owned`), its
coordinator epoch the partition's leader epoch, loaded in a worker thread when the leadership
arrives (COORDINATOR_LOAD_IN_PROGRESS meanwhile; Prepare* states found are finished by writing
their markers) and dropped when it leaves (NOT_COORDINATOR). Operations still append and replay
without an await in between; `run` then waits until the records are replicated (a failure puts
the touched ids back to the log below the high watermark and answers the write-failure error).
Markers go to each data partition's leader (`send_markers`: WriteTxnMarkers through the node's
marker connections, one request per leader) from a task per transaction that re-sends what
failed to the current leader until every partition has its marker (Kafka's marker channel; see
`write_markers`); EndTxn waits for them at most `_MARKER_WAIT_S`.

Error handling: an unreadable record while loading is logged and skipped; a failing
`__transaction_state` append answers the operation's `error_on_write_failure` and replays
nothing; a marker a partition refuses (fenced epoch) is logged and counts as written, since
retrying cannot succeed and the transaction must not hang.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import trio

from kafkapy.coordinator.txn import (
    CoordinatorResult,
    TopicPartition,
    TransactionCoordinator,
    TxnLogRecord,
    TxnState,
    WriteTxnMarkers,
    partition_for,
)
from kafkapy.coordinator.txn.records import decode_key
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import (
    Record,
    build_batch,
    decode_records,
)
from kafkapy.server.broker import LEADER_EPOCH, Broker, now_ms
from kafkapy.server.internal_topics import (
    OwnedPartitions,
    cluster_of,
    create_internal_logs,
    ensure_cluster_topic,
    internal_partition_log,
    log_batches,
    partition_count,
    register_internal_topic,
    register_role_listener,
    wait_replicated,
)
from kafkapy.server.metadata_store import TopicInfo
from kafkapy.server.txn_markers import (
    RETRY_CODES,
    RETRY_CODES_CLUSTER,
    close_marker_peers,
    send_markers,
)
from kafkapy.storage import PartitionLog
from kafkapy.storage.errors import KafkaStorageError, StorageError

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "Outcome",
    "TxnDriver",
    "existing_txn_driver",
    "install_txn_driver",
    "run_txn_driver",
    "txn_driver",
]

log = logging.getLogger(__name__)

_COMPLETED = {TxnState.COMPLETE_COMMIT: "commit", TxnState.COMPLETE_ABORT: "abort"}

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


def _read_partition(plog: PartitionLog, name: str, end: int | None = None
                    ) -> list[tuple[bytes, bytes | None]]:
    """Every keyed record of one `__transaction_state` log below `end` (worker thread)."""
    out: list[tuple[bytes, bytes | None]] = []
    try:
        for data, pos, header in log_batches(plog, None, end):
            if header.is_control:
                continue
            try:
                records = decode_records(data, pos, header)
            except ProtocolError as exc:
                log.warning("skipping unreadable %s batch: %s", name, exc)
                continue
            out.extend((r.key, r.value) for r in records if r.key is not None)
    except ProtocolError as exc:  # recovery validated the log; never expected
        log.error("%s unreadable: %s", plog.directory.name, exc)
    return out


def _read_records(broker: Broker, info: TopicInfo) -> list[tuple[bytes, bytes | None]]:
    """Every keyed record of `__transaction_state`, partition by partition (worker thread)."""
    out: list[tuple[bytes, bytes | None]] = []
    for partition in range(info.partitions):
        plog = broker.logs.get(info.name, partition)
        if plog is not None:
            out.extend(_read_partition(plog, info.name))
    return out


class TxnDriver:
    def __init__(self, broker: Broker, *, partitioned: bool | None = None) -> None:
        self.broker = broker
        cfg = broker.config
        self.num_partitions = max(cfg.get_int("transaction.state.log.num.partitions"), 1)
        self.partitioned = cluster_of(broker) is not None if partitioned is None else partitioned
        # single-node mode: the coordinator of every partition
        self.coordinator = self._new_coordinator(0)
        self.owned: OwnedPartitions[TransactionCoordinator] = OwnedPartitions()
        self.loaded = False
        self.loaded_event = trio.Event()
        self._loading: trio.Event | None = None
        self._changed = trio.Event()
        self._writing: set[str] = set()  # transactional ids whose markers are being written
        self._next_expiry_ms = 0
        self._marker_retry_ms: int | None = None  # when pending markers are retried next
        self._nursery: trio.Nursery | None = None  # run_timers()'s, for partition loads
        self._queued_loads: list[tuple[int, int]] = []
        if cluster_of(broker) is not None:
            register_role_listener(broker, self, TRANSACTION_STATE_TOPIC)

    def _new_coordinator(self, coordinator_epoch: int) -> TransactionCoordinator:
        cfg = self.broker.config
        return TransactionCoordinator(
            coordinator_epoch=coordinator_epoch,
            num_partitions=self.num_partitions,
            offsets_topic_partitions=max(cfg.get_int("offsets.topic.num.partitions"), 1),
            max_transaction_timeout_ms=cfg.get_int("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=cfg.get_int("transactional.id.expiration.ms"),
            allocate_producer_id=self.broker.producer_ids.allocate,
        )

    # -- which coordinator -----------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        if self.partitioned:
            count = partition_count(self.broker, TRANSACTION_STATE_TOPIC)
            if count:
                self.num_partitions = count
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_for(self, transactional_id: str) -> TransactionCoordinator | ErrorCode:
        """The coordinator of the id, or NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        if not self.partitioned:
            return self.coordinator
        return self.owned.lookup(self.partition_for(transactional_id))

    def coordinators(self) -> list[TransactionCoordinator]:
        if not self.partitioned:
            return [self.coordinator]
        return [c for _, c in sorted(self.owned.loaded().items())]

    # -- start-up ------------------------------------------------------------------------

    async def ensure_loaded(self) -> None:
        """Create or load `__transaction_state` once; concurrent callers wait for the first.
        Partitioned mode loads partitions as their leadership arrives instead."""
        if self.partitioned and not self.loaded:
            self.loaded = True
            self.loaded_event.set()
            if cluster_of(self.broker) is None and TRANSACTION_STATE_TOPIC not in self.broker.topics:
                await create_internal_logs(self.broker, self._register_topic())
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

    def _topic_configs(self) -> dict[str, str]:
        segment_bytes = self.broker.config.get("transaction.state.log.segment.bytes") or "104857600"
        return {"cleanup.policy": "compact", "segment.bytes": segment_bytes}

    def _register_topic(self) -> TopicInfo:
        return register_internal_topic(
            self.broker, TRANSACTION_STATE_TOPIC, self.num_partitions, self._topic_configs()
        )

    async def ensure_topic(self) -> bool:
        """Cluster mode: does `__transaction_state` exist? The first call asks the controller
        to create it (FindCoordinator answers COORDINATOR_NOT_AVAILABLE until it is there)."""
        if cluster_of(self.broker) is None:
            return True
        return await ensure_cluster_topic(
            self.broker, TRANSACTION_STATE_TOPIC, self.num_partitions, self._topic_configs(),
            "transaction.state.log.replication.factor",
        )

    # -- partition leadership (partitioned mode) ---------------------------------------------

    def on_become_leader(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Role listener: load the partition's transactional ids in the background (their
        requests answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), then finish what the previous
        coordinator left half done (markers of Prepare* states)."""
        if topic != TRANSACTION_STATE_TOPIC or not self.partitioned:
            return
        if not self.owned.begin_load(partition, leader_epoch):
            return
        if self._nursery is None:
            self._queued_loads.append((partition, leader_epoch))
        else:
            self._nursery.start_soon(self._load_partition, partition, leader_epoch)

    def on_become_follower(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Role listener: forget the partition's ids (their clients get NOT_COORDINATOR)."""
        if topic != TRANSACTION_STATE_TOPIC or not self.partitioned:
            return
        if self.owned.drop(partition) is not None:
            log.info("%s-%d moved away (leader epoch %d)", TRANSACTION_STATE_TOPIC, partition,
                     leader_epoch)

    def _plog(self, partition: int) -> PartitionLog | None:
        if cluster_of(self.broker) is None:
            return internal_partition_log(self.broker, TRANSACTION_STATE_TOPIC, partition)
        return (self.broker.partition_log(TRANSACTION_STATE_TOPIC, partition)
                or self.broker.logs.get(TRANSACTION_STATE_TOPIC, partition))

    async def _load_partition(self, partition: int, leader_epoch: int) -> None:
        # Kafka's coordinator epoch is the partition's leader epoch: markers of an older
        # coordinator of the same producer are refused by the data partitions
        self.partition_for("")  # the topic's real partition count, from the image
        coordinator = self._new_coordinator(leader_epoch)
        try:
            plog = self._plog(partition)
            records: list[tuple[bytes, bytes | None]] = []
            if plog is not None:
                records = await trio.to_thread.run_sync(
                    _read_partition, plog, TRANSACTION_STATE_TOPIC
                )
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
            if self.owned.is_current(partition, leader_epoch):
                self.owned.drop(partition)
            return
        for key, value in records:
            try:
                coordinator.replay(key, value)
            except ProtocolError as exc:
                log.warning("skipping unreadable %s record: %s", TRANSACTION_STATE_TOPIC, exc)
        result = coordinator.load_complete(now_ms())
        if not self.owned.finish_load(partition, leader_epoch, coordinator):
            return
        log.info("loaded %s-%d (leader epoch %d): %d records, %d transactional ids",
                 TRANSACTION_STATE_TOPIC, partition, leader_epoch, len(records),
                 len(coordinator.transactions))
        self._changed.set()
        await self.run(result, coordinator)

    # -- operations ----------------------------------------------------------------------

    def commit(
        self, result: CoordinatorResult[T], coordinator: TransactionCoordinator | None = None
    ) -> Outcome[T]:
        """Append the records, then replay them (no await: operations never interleave).
        `coordinator` is the one that made `result` (partitioned mode; default the single one)."""
        target = self.coordinator if coordinator is None else coordinator
        try:
            self._append(result.records, target)
        except (StorageError, ProtocolError) as exc:
            log.error("appending to %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
            return Outcome(False, result.response, result.error_on_write_failure)
        for record in result.records:
            target.replay(record.key, record.value)
            self._count_completion(target, record)
        if result.records:
            self._changed.set()
        return Outcome(True, result.response)

    def _count_completion(self, coordinator: TransactionCoordinator, record: TxnLogRecord) -> None:
        """Every transaction that ends (with or without partitions, by EndTxn or a timeout)
        writes one CompleteCommit/CompleteAbort record: count it for the metrics."""
        if record.value is None:
            return
        _, transactional_id = decode_key(record.key)
        md = coordinator.transactions.get(transactional_id) if transactional_id else None
        if md is not None and md.state in _COMPLETED:
            self.broker.stats.transactions_completed[_COMPLETED[md.state]] += 1

    async def run(
        self, result: CoordinatorResult[T], coordinator: TransactionCoordinator | None = None
    ) -> Outcome[T]:
        """`commit`, then (partitioned mode) wait until the records are replicated, then write
        the operation's markers (before the caller answers)."""
        target = self.coordinator if coordinator is None else coordinator
        starts: dict[int, int] = {}
        if self.partitioned:  # where the records will start, for a revert
            for r in result.records:
                plog = self._plog(r.partition)
                if plog is not None:
                    starts.setdefault(r.partition, plog.log_end_offset)
        outcome = self.commit(result, target)
        if outcome.written and self.partitioned and result.records:
            outcome = await self._replicated(result, target, outcome, starts)
        if outcome.written and result.markers:
            await self.write_markers(result.markers, target)
        return outcome

    async def _replicated(
        self, result: CoordinatorResult[T], coordinator: TransactionCoordinator,
        outcome: Outcome[T], starts: dict[int, int],
    ) -> Outcome[T]:
        """Wait for the appended partitions' HW; on failure put the touched ids back to what
        the log holds before the records (and below the HW; the records stay in the log,
        replicated too few times or not at all) and answer the write-failure error."""
        failed: set[int] = set()
        for partition in sorted({r.partition for r in result.records}):
            plog = self._plog(partition)
            if plog is None:
                continue
            code = await wait_replicated(
                self.broker, TRANSACTION_STATE_TOPIC, partition, plog.log_end_offset
            )
            if code is not ErrorCode.NONE:
                log.warning("%s-%d did not replicate: %s", TRANSACTION_STATE_TOPIC, partition,
                            code.name)
                failed.add(partition)
        if not failed:
            return outcome
        for partition in failed:
            plog = self._plog(partition)
            committed: dict[bytes, bytes | None] = {}
            if plog is not None:
                end = min(plog.high_watermark, starts.get(partition, plog.high_watermark))
                committed = dict(_read_partition(plog, TRANSACTION_STATE_TOPIC, end))
            for r in result.records:
                if r.partition == partition:
                    try:
                        coordinator.replay(r.key, committed.get(r.key))
                    except ProtocolError:
                        log.exception("cannot revert a %s record", TRANSACTION_STATE_TOPIC)
        return Outcome(False, result.response, result.error_on_write_failure)

    def _append(self, records: Iterable[TxnLogRecord], coordinator: TransactionCoordinator) -> None:
        by_partition: dict[int, list[Record]] = {}
        for r in records:
            batch = by_partition.setdefault(r.partition, [])
            batch.append(Record(len(batch), 0, r.key, r.value, []))
        now = now_ms()
        for partition, batch_records in by_partition.items():
            epoch = LEADER_EPOCH
            if self.partitioned:
                if self.owned.lookup(partition) is not coordinator:
                    raise KafkaStorageError(f"{TRANSACTION_STATE_TOPIC}-{partition} moved away")
                epoch = self.owned.leader_epoch(partition) or 0
            plog = self._state_log(partition)
            plog.append(build_batch(batch_records, base_timestamp=now), now_ms=now,
                        leader_epoch=epoch)
            self.broker.after_append(TRANSACTION_STATE_TOPIC, partition, plog)

    def _state_log(self, partition: int) -> PartitionLog:
        plog = self._plog(partition)
        if plog is None:
            raise KafkaStorageError(f"{TRANSACTION_STATE_TOPIC}-{partition} does not exist")
        return plog

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
               tp: TopicPartition) -> ErrorCode:
        """KIP-890 part 1, before a producer's first transactional write to a partition: is the
        partition in that producer's ongoing transaction? Errors as the produce path answers
        them (PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH since KIP-588). In partitioned
        mode an id coordinated by another broker is not verified here (NONE): that would need
        a round trip the synchronous produce path cannot make."""
        if not transactional_id:
            return ErrorCode.INVALID_TXN_STATE
        coordinator = self.coordinator_for(transactional_id)
        if isinstance(coordinator, ErrorCode):
            return ErrorCode.NONE
        result = coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, [tp], now_ms(), verify_only=True
        )
        code = result.response.get(tp, ErrorCode.INVALID_TXN_STATE)
        return ErrorCode.INVALID_PRODUCER_EPOCH if code is ErrorCode.PRODUCER_FENCED else code

    # -- markers -------------------------------------------------------------------------

    async def write_markers(
        self, actions: Iterable[WriteTxnMarkers], coordinator: TransactionCoordinator | None = None
    ) -> None:
        """Write each action's control batches, then complete the transaction.

        Single node: one attempt each (local appends, done before EndTxn answers); what fails
        stays pending for the timer task's retry. Partitioned mode (Kafka's marker channel):
        each action runs as a task of its own that sends every partition's marker to the
        partition's current leader, one WriteTxnMarkers per leader, and re-sends what failed
        (a leader that moved, died or could not be reached) to the leader the image names
        then, backing off from 50 ms to 1 s, until all are written or the transaction left
        this coordinator; a written partition is never sent again. The caller (EndTxn) waits
        at most `_MARKER_WAIT_S` for them, so a dead data leader delays the answer by at most
        that and the transaction by about its failover."""
        target = self.coordinator if coordinator is None else coordinator
        started: list[trio.Event] = []
        for action in actions:
            if action.transactional_id in self._writing:
                continue  # another task is on it
            self._writing.add(action.transactional_id)
            done = trio.Event()
            if self.partitioned and self._nursery is not None:
                self._nursery.start_soon(self._mark_until_written, action, target, done)
                started.append(done)
            else:
                await self._mark_once(action, target, done)
        with trio.move_on_after(_MARKER_WAIT_S):
            for done in started:
                await done.wait()

    async def _mark_once(self, action: WriteTxnMarkers, target: TransactionCoordinator,
                         done: trio.Event) -> None:
        retry = RETRY_CODES_CLUSTER if self.partitioned else RETRY_CODES
        try:
            codes = await send_markers(
                self.broker, action.partitions, action.producer_id, action.producer_epoch,
                action.coordinator_epoch, action.commit,
            )
            if not any(code in retry for code in codes.values()):
                await self._complete(action, target)
        finally:
            self._writing.discard(action.transactional_id)
            self._changed.set()  # the timer task schedules a retry of what is still pending
            done.set()

    async def _mark_until_written(self, action: WriteTxnMarkers, target: TransactionCoordinator,
                                  done: trio.Event) -> None:
        tid = action.transactional_id
        written: set[TopicPartition] = set()
        backoff = _MARKER_BACKOFF_MIN_S
        started = trio.current_time()
        try:
            for attempt in itertools.count(1):
                if self.coordinator_for(tid) is not target or not _still_preparing(target, action):
                    return  # moved away or reloaded: the current coordinator finishes it
                todo = action.partitions - written
                try:
                    codes = await send_markers(
                        self.broker, todo, action.producer_id, action.producer_epoch,
                        action.coordinator_epoch, action.commit,
                    )
                except Exception:  # a bug must not end the task (and its siblings): retry
                    log.exception("writing the markers of %s failed", tid)
                    codes = dict.fromkeys(todo, ErrorCode.UNKNOWN_SERVER_ERROR)
                    failed = codes
                else:
                    failed = {tp: c for tp, c in codes.items() if c in RETRY_CODES_CLUSTER}
                written.update(tp for tp in codes if tp not in failed)
                if not failed:
                    if attempt > 1:
                        log.info("markers for %s written after %d attempts (%.1f s)", tid,
                                 attempt, trio.current_time() - started)
                    await self._complete(action, target)
                    return
                if attempt == 1 or attempt % 30 == 0:  # the first failure, then every ~30 s
                    log.log(logging.INFO if attempt == 1 else logging.WARNING,
                            "markers for %s: %s; retrying at the current leaders (attempt %d, "
                            "%.1f s)", tid, ", ".join(f"{tp.topic}-{tp.partition} {c.name}"
                                                      for tp, c in sorted(failed.items())),
                            attempt, trio.current_time() - started)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, _RETRY_S)
        finally:
            self._writing.discard(tid)
            self._changed.set()
            done.set()

    async def _complete(self, action: WriteTxnMarkers, target: TransactionCoordinator) -> None:
        if self.partitioned and self.coordinator_for(action.transactional_id) is not target:
            return  # moved away meanwhile: the new coordinator finishes it
        await self.run(target.complete_markers(
            action.transactional_id, action.producer_id, action.producer_epoch, now_ms(),
        ), target)

    # -- timers --------------------------------------------------------------------------

    def _next_deadline_ms(self) -> int:
        """Earliest transaction timeout, the next expiry check, or a retry of pending markers
        (a fixed time, `_RETRY_S` after they were first seen pending: a deadline recomputed
        as "now + retry" at every wake-up would never come)."""
        now = now_ms()
        deadline = max(self._next_expiry_ms, now)
        for coordinator in self.coordinators():
            for tid, md in coordinator.transactions.items():
                if md.state is TxnState.ONGOING:
                    deadline = min(deadline, md.txn_start_timestamp + md.txn_timeout_ms + 1)
                elif (md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
                      and tid not in self._writing):
                    if self._marker_retry_ms is None:
                        self._marker_retry_ms = now + int(_RETRY_S * 1000)
                    deadline = min(deadline, self._marker_retry_ms)
        return deadline

    async def tick(self) -> None:
        """Run the timers that are due (the timer task calls this; tests may too)."""
        now = now_ms()
        self._marker_retry_ms = None  # pending markers are retried now; the next retry later
        expiry_due = now >= self._next_expiry_ms
        if expiry_due:
            self._next_expiry_ms = now + min(
                _EXPIRY_CHECK_MS, self.coordinator.transactional_id_expiration_ms
            )
        for coordinator in self.coordinators():
            result = coordinator.abort_timed_out_transactions(now)
            if result.response:
                log.info("aborting timed-out transactions: %s", ", ".join(result.response))
            await self.run(result, coordinator)
            if expiry_due:
                expired = coordinator.expire_transactional_ids(now)
                if expired.response:
                    log.info("transactional ids expired: %s", ", ".join(expired.response))
                await self.run(expired, coordinator)
            pending = [m for m in coordinator.pending_markers()
                       if m.transactional_id not in self._writing]
            if pending:
                log.info("retrying the markers of %s",
                         ", ".join(sorted(m.transactional_id for m in pending)))
                await self.write_markers(pending, coordinator)
        if self.partitioned:
            await self.broker.producer_ids.prefetch()

    async def run_timers(self) -> None:
        """Fire timeouts, expiry and marker retries at their deadlines, forever; in
        partitioned mode also load the partitions whose leadership arrives."""
        await self.ensure_loaded()
        self._next_expiry_ms = now_ms() + min(
            _EXPIRY_CHECK_MS, self.coordinator.transactional_id_expiration_ms
        )
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for partition, epoch in self._queued_loads:
                nursery.start_soon(self._load_partition, partition, epoch)
            self._queued_loads.clear()
            try:
                await self._timer_loop()
            finally:
                self._nursery = None

    async def _timer_loop(self) -> None:
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


#: how long EndTxn waits for its markers before answering (they go on in the background)
_MARKER_WAIT_S = 1.0
_MARKER_BACKOFF_MIN_S = 0.05


def _still_preparing(coordinator: TransactionCoordinator, action: WriteTxnMarkers) -> bool:
    md = coordinator.transactions.get(action.transactional_id)
    return (
        md is not None
        and md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        and (md.producer_id, md.producer_epoch) == (action.producer_id, action.producer_epoch)
    )


_DRIVERS: weakref.WeakKeyDictionary[Broker, TxnDriver] = weakref.WeakKeyDictionary()


def _driver(broker: Broker) -> TxnDriver:
    driver = _DRIVERS.get(broker)
    if driver is None:
        driver = _DRIVERS[broker] = TxnDriver(broker)
    return driver


def existing_txn_driver(broker: Broker) -> TxnDriver | None:
    """The broker's driver if one was created (no side effect: for read-only views)."""
    return _DRIVERS.get(broker)


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
    # partitioned mode starts at once: leaderships arrive whether or not anyone asked yet
    if not driver.partitioned and broker.topics.get(TRANSACTION_STATE_TOPIC) is None:
        await driver.loaded_event.wait()
    try:
        while True:  # a failure here must not take the server down
            try:
                await driver.run_timers()
            except Exception:
                log.exception("transaction coordinator runtime failed; retrying")
                await trio.sleep(_RETRY_S)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await close_marker_peers(broker)


def install_txn_driver(broker: Broker, driver: TxnDriver) -> None:
    """Make `driver` the broker's own (one built by hand, e.g. partitioned mode on one node
    for tests); call it before the server starts or any request arrives."""
    _DRIVERS[broker] = driver
