"""The transaction coordinator's adapter to the coordinator runtime: markers and its timers.

`TransactionCoordinator` is a plain state machine (operations return records, responses and
marker actions; state changes only by replaying records); `CoordinatorRuntime` keeps it in
`__transaction_state` (ownership of the partitions, load by replay, append and wait for
replication, the timer task). What is the transaction coordinator's own lives here. It follows
the runtime contract of docs/transactions.md section 2 - for one operation: append its records
(one batch per partition), replay them, then answer and write its markers. Operation, append and
replay run without an await in between, so on the one trio thread operations never interleave
and no lock is needed.

How a marker is written and sent is `txn_markers`. When every partition has its marker,
`complete_markers` moves the transaction to Complete*. A failed marker write is retried by the
timer task (`pending_markers`, a second later), as is a batch of markers interrupted by a crash
(`load_complete` when the partition loads).

Resource handling: the `Broker` builds one (`broker.txn_coordinator`); `__transaction_state`
(compacted, `transaction.state.log.num.partitions`) is asked of the controller by the first
FindCoordinator for a transactional id, so brokers without transactional producers never pay
for it. `serve()` is the server's timer task (transaction timeouts, transactional-id expiry,
marker retries) and loads the partitions whose leadership arrives, so a restarted broker aborts
or completes what was in flight without waiting for a client. Producer ids come from
`broker.producer_ids` (controller blocks), which idempotent producers share, so the two kinds
never collide.

Each coordinator (one per `__transaction_state` partition led here, for one node as for many)
has its partition's leader epoch as its epoch; a partition loaded with Prepare* states finishes
them by writing their markers. After an operation's append the
runtime waits until the records are replicated (a failure puts the touched ids back to the log
below the high watermark and answers the write-failure error). Markers go to each data
partition's leader (`send_markers`: WriteTxnMarkers through the node's marker connections, one
request per leader) from a task per transaction that re-sends what failed to the current leader
until every partition has its marker (Kafka's marker channel; see `write_markers`); EndTxn waits
for them at most `_MARKER_WAIT_S`.

Error handling: an unreadable record while loading is logged and skipped; a failing
`__transaction_state` append answers the operation's `error_on_write_failure` and replays
nothing; a marker a partition refuses (fenced epoch) is logged and counts as written, since
retrying cannot succeed and the transaction must not hang.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from kafkapy.broker import runtime
from kafkapy.broker.clock import now_ms
from kafkapy.broker.coordinator_runtime import Appended, CoordinatorRuntime, RuntimeHost
from kafkapy.broker.internal_topics import log_batches
from kafkapy.broker.txn_markers import (
    RETRY_CODES,
    MarkerHost,
    MarkerPeers,
    send_markers,
)
from kafkapy.coordinator import txn as coordinator_txn
from kafkapy.coordinator.txn import TopicPartition, TxnState, partition_for
from kafkapy.coordinator.txn.records import decode_key
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import Record, decode_records
from kafkapy.storage import PartitionLog
from kafkapy.storage.errors import StorageError

if TYPE_CHECKING:
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.coordinator.txn import (
        CoordinatorResult,
        TransactionCoordinator,
        TxnLogRecord,
        WriteTxnMarkers,
    )

__all__ = ["TRANSACTION_STATE_TOPIC", "Outcome", "TxnDriver", "TxnHost"]

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


def _read_partition(plog: PartitionLog, name: str, start: int | None = None,
                    end: int | None = None) -> list[tuple[bytes, bytes | None]]:
    """Every keyed record of one `__transaction_state` log in [start, end) (any thread)."""
    out: list[tuple[bytes, bytes | None]] = []
    try:
        for data, pos, header in log_batches(plog, start, end):
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


class TxnHost(RuntimeHost, MarkerHost, Protocol):
    """What the transaction runtime uses of the broker it runs in: a runtime's (`RuntimeHost`),
    the marker sender's (`MarkerHost`) and the counters of completed transactions. A Protocol
    for the reason `InternalTopicsHost` gives."""

    @property
    def stats(self) -> BrokerStats: ...


class TxnDriver(CoordinatorRuntime["TransactionCoordinator"]):
    timer_retry_s = _RETRY_S
    broker: TxnHost

    def __init__(self, broker: TxnHost) -> None:
        self._writing: set[str] = set()  # transactional ids whose markers are being written
        #: transactional ids whose newest state records are appended but not replicated yet:
        #: their in-memory state (already replayed) is no decision yet, so the timers leave
        #: them alone - markers sent for an unreplicated PrepareCommit contradicted the next
        #: leader, which never saw it and aborted (offsets committed, output aborted)
        self._replicating: dict[str, int] = {}
        self._next_expiry_ms = 0
        self._marker_retry_ms: int | None = None  # when pending markers are retried next
        #: the connections markers go to other brokers on
        self.marker_peers = MarkerPeers(broker)
        super().__init__(
            broker,
            topic=TRANSACTION_STATE_TOPIC,
            num_partitions=broker.config.get_int("transaction.state.log.num.partitions"),
            partitioner=partition_for,
            replication_factor_key="transaction.state.log.replication.factor",
        )

    # -- the runtime's interface -------------------------------------------------------------

    def new_coordinator(self, leader_epoch: int) -> TransactionCoordinator:
        cfg = self.broker.config
        return coordinator_txn.TransactionCoordinator(
            coordinator_epoch=leader_epoch,
            num_partitions=self.num_partitions,
            offsets_topic_partitions=max(cfg.get_int("offsets.topic.num.partitions"), 1),
            max_transaction_timeout_ms=cfg.get_int("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=cfg.get_int("transactional.id.expiration.ms"),
            allocate_producer_id=self.broker.producer_ids.allocate,
        )

    def replay_log(self, plog: PartitionLog, into: TransactionCoordinator, start: int | None,
                   end: int | None) -> int:
        records = _read_partition(plog, TRANSACTION_STATE_TOPIC, start, end)
        for key, value in records:
            try:
                into.replay(key, value)
            except ProtocolError as exc:
                log.warning("skipping unreadable %s record: %s", TRANSACTION_STATE_TOPIC, exc)
        return len(records)

    async def activate(self, coordinator: TransactionCoordinator) -> None:
        """Finish what the previous coordinator left half done (markers of Prepare* states,
        the abort of a fenced transaction)."""
        await self.run(coordinator.load_complete(now_ms()), coordinator)

    def deactivate(self, coordinator: TransactionCoordinator) -> None:
        """Nothing waits in a transaction coordinator: its ids answer NOT_COORDINATOR now."""

    def describe(self, coordinator: TransactionCoordinator) -> str:
        return f"{len(coordinator.transactions)} transactional ids"

    def held(self, coordinator: TransactionCoordinator) -> tuple[int, str]:
        return len(coordinator.transactions), "transactional ids"

    def topic_configs(self) -> dict[str, str]:
        segment_bytes = self.broker.config.get("transaction.state.log.segment.bytes") or "104857600"
        return {"cleanup.policy": "compact", "segment.bytes": segment_bytes}

    # -- operations ----------------------------------------------------------------------

    def commit(self, result: CoordinatorResult[T], coordinator: TransactionCoordinator) -> Outcome[T]:
        """Append the records, then replay them (no await: operations never interleave).
        `coordinator` is the one that made `result`."""
        return self._commit(result, coordinator)[0]

    def _commit(
        self, result: CoordinatorResult[T], target: TransactionCoordinator
    ) -> tuple[Outcome[T], dict[int, Appended]]:
        try:
            appended = self._append(result.records, target)
        except (StorageError, ProtocolError) as exc:
            log.error("appending to %s failed: %s", TRANSACTION_STATE_TOPIC, exc)
            return Outcome(False, result.response, result.error_on_write_failure), {}
        for record in result.records:
            target.replay(record.key, record.value)
            self._count_completion(target, record)
        if result.records:
            self.wake()
        return Outcome(True, result.response), appended

    def _count_completion(self, coordinator: TransactionCoordinator, record: TxnLogRecord) -> None:
        """Every transaction that ends (with or without partitions, by EndTxn or a timeout)
        writes one CompleteCommit/CompleteAbort record: count it for the metrics."""
        if record.value is None:
            return
        _, transactional_id = decode_key(record.key)
        md = coordinator.transactions.get(transactional_id) if transactional_id else None
        if md is not None and md.state in _COMPLETED:
            self.broker.stats.transactions_completed[_COMPLETED[md.state]] += 1

    async def run(self, result: CoordinatorResult[T], target: TransactionCoordinator) -> Outcome[T]:
        """`commit`, then wait until the records are replicated, then write the operation's
        markers (before the caller answers). `target` is the coordinator that made `result`."""
        outcome, appended = self._commit(result, target)
        if outcome.written and appended:
            tids = {tid for r in result.records if (tid := decode_key(r.key)[1])}
            for tid in tids:
                self._replicating[tid] = self._replicating.get(tid, 0) + 1
            try:
                outcome = await self._replicated(result, target, outcome, appended)
            finally:
                for tid in tids:
                    left = self._replicating.pop(tid) - 1
                    if left:
                        self._replicating[tid] = left
        if outcome.written and result.markers:
            await self.write_markers(result.markers, target)
        return outcome

    async def _replicated(
        self, result: CoordinatorResult[T], coordinator: TransactionCoordinator,
        outcome: Outcome[T], appended: dict[int, Appended],
    ) -> Outcome[T]:
        """Wait for the appended partitions' HW; on failure put the touched ids back to what
        the log holds before the records (and below the HW; the records stay in the log,
        replicated too few times or not at all) and answer the write-failure error."""
        failed: list[int] = []
        for partition, done in sorted(appended.items()):
            code = await self.wait_replicated(partition, done.end)
            if code is not ErrorCode.NONE:
                log.warning("%s-%d did not replicate: %s", TRANSACTION_STATE_TOPIC, partition,
                            code.name)
                failed.append(partition)
        for partition in failed:
            plog = self.partition_log(partition)
            committed: dict[bytes, bytes | None] = {}
            if plog is not None:
                end = self.committed_end(partition, plog, appended[partition].start)
                committed = dict(_read_partition(plog, TRANSACTION_STATE_TOPIC, None, end))
            for r in result.records:
                if r.partition == partition:
                    try:
                        coordinator.replay(r.key, committed.get(r.key))
                    except ProtocolError:
                        log.exception("cannot revert a %s record", TRANSACTION_STATE_TOPIC)
        if failed:
            return Outcome(False, result.response, result.error_on_write_failure)
        return outcome

    def _append(
        self, records: Iterable[TxnLogRecord], coordinator: TransactionCoordinator
    ) -> dict[int, Appended]:
        """One batch per `__transaction_state` partition; raises what the append raised."""
        by_partition: dict[int, list[Record]] = {}
        for r in records:
            batch = by_partition.setdefault(r.partition, [])
            batch.append(Record(len(batch), 0, r.key, r.value, []))
        return {
            partition: self.append(partition, batch_records, coordinator)
            for partition, batch_records in by_partition.items()
        }

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
               tp: TopicPartition) -> ErrorCode:
        """KIP-890 part 1, before a producer's first transactional write to a partition: is the
        partition in that producer's ongoing transaction? Errors as the produce path answers
        them (PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH since KIP-588). An id coordinated
        by another broker is not verified here (NONE): that would need a round trip the
        synchronous produce path cannot make."""
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
        self, actions: Iterable[WriteTxnMarkers], target: TransactionCoordinator
    ) -> None:
        """Write each action's control batches, then complete the transaction.

        Kafka's marker channel: each action runs as a task of its own that sends every partition's marker to the
        partition's current leader, one WriteTxnMarkers per leader, and re-sends what failed
        (a leader that moved, died or could not be reached) to the leader the image names
        then, backing off from 50 ms to 1 s, until all are written or the transaction left
        this coordinator; a written partition is never sent again. The caller (EndTxn) waits
        at most `_MARKER_WAIT_S` for them, so a dead data leader delays the answer by at most
        that and the transaction by about its failover. Before the runtime's task runs (no
        nursery yet) an action gets one attempt; what fails stays pending for the timer
        task's retry."""
        started: list[runtime.Event] = []
        for action in actions:
            if action.transactional_id in self._writing:
                continue  # another task is on it
            self._writing.add(action.transactional_id)
            done = runtime.new_event()
            if self._nursery is not None:
                self._nursery.start_soon(self._mark_until_written, action, target, done)
                started.append(done)
            else:
                await self._mark_once(action, target, done)
        with runtime.get().move_on_after(_MARKER_WAIT_S):
            for done in started:
                await done.wait()

    async def _mark_once(self, action: WriteTxnMarkers, target: TransactionCoordinator,
                         done: runtime.Event) -> None:
        try:
            codes = await send_markers(
                self.broker, self.marker_peers, action.partitions, action.producer_id,
                action.producer_epoch, action.coordinator_epoch, action.commit,
            )
            if not any(code in RETRY_CODES for code in codes.values()):
                await self._complete(action, target)
        finally:
            self._writing.discard(action.transactional_id)
            self.wake()  # the timer task schedules a retry of what is still pending
            done.set()

    async def _mark_until_written(self, action: WriteTxnMarkers, target: TransactionCoordinator,
                                  done: runtime.Event) -> None:
        tid = action.transactional_id
        written: set[TopicPartition] = set()
        backoff = _MARKER_BACKOFF_MIN_S
        started = runtime.get().current_time()
        try:
            for attempt in itertools.count(1):
                if self.coordinator_for(tid) is not target or not _still_preparing(target, action):
                    return  # moved away or reloaded: the current coordinator finishes it
                todo = action.partitions - written
                try:
                    codes = await send_markers(
                        self.broker, self.marker_peers, todo, action.producer_id,
                        action.producer_epoch, action.coordinator_epoch, action.commit,
                    )
                except Exception:  # a bug must not end the task (and its siblings): retry
                    log.exception("writing the markers of %s failed", tid)
                    codes = dict.fromkeys(todo, ErrorCode.UNKNOWN_SERVER_ERROR)
                    failed = codes
                else:
                    failed = {tp: c for tp, c in codes.items() if c in RETRY_CODES}
                written.update(tp for tp in codes if tp not in failed)
                if not failed:
                    if attempt > 1:
                        log.info("markers for %s written after %d attempts (%.1f s)", tid,
                                 attempt, runtime.get().current_time() - started)
                    await self._complete(action, target)
                    return
                if attempt == 1 or attempt % 30 == 0:  # the first failure, then every ~30 s
                    log.log(logging.INFO if attempt == 1 else logging.WARNING,
                            "markers for %s: %s; retrying at the current leaders (attempt %d, "
                            "%.1f s)", tid, ", ".join(f"{tp.topic}-{tp.partition} {c.name}"
                                                      for tp, c in sorted(failed.items())),
                            attempt, runtime.get().current_time() - started)
                await runtime.get().sleep(backoff)
                backoff = min(backoff * 2, _RETRY_S)
        finally:
            self._writing.discard(tid)
            self.wake()
            done.set()

    async def _complete(self, action: WriteTxnMarkers, target: TransactionCoordinator) -> None:
        if self.coordinator_for(action.transactional_id) is not target:
            return  # moved away meanwhile: the new coordinator finishes it
        await self.run(target.complete_markers(
            action.transactional_id, action.producer_id, action.producer_epoch, now_ms(),
        ), target)

    # -- timers --------------------------------------------------------------------------

    def next_deadline(self) -> int:
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
                      and tid not in self._writing and tid not in self._replicating):
                    if self._marker_retry_ms is None:
                        self._marker_retry_ms = now + int(_RETRY_S * 1000)
                    deadline = min(deadline, self._marker_retry_ms)
        return deadline

    async def fire_timers(self) -> None:
        """Run the timers that are due (the timer task calls this; tests may too)."""
        now = now_ms()
        self._marker_retry_ms = None  # pending markers are retried now; the next retry later
        expiry_due = now >= self._next_expiry_ms
        if expiry_due:
            self._next_expiry_ms = now + self._expiry_interval_ms()
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
                       if m.transactional_id not in self._writing
                       and m.transactional_id not in self._replicating]
            if pending:
                log.info("retrying the markers of %s",
                         ", ".join(sorted(m.transactional_id for m in pending)))
                await self.write_markers(pending, coordinator)
        await self.broker.producer_ids.prefetch()

    def _expiry_interval_ms(self) -> int:
        return min(_EXPIRY_CHECK_MS, self.broker.config.get_int("transactional.id.expiration.ms"))

    async def serve(self) -> None:
        """The server's long-lived task: it starts at once, since leaderships arrive whether
        or not anyone asked yet. A failure here must not take the server down: it is logged
        and the runtime restarted."""
        try:
            while True:
                try:
                    await self.ensure_loaded()
                    self._next_expiry_ms = now_ms() + self._expiry_interval_ms()
                    await super().serve()
                except Exception:
                    log.exception("transaction coordinator runtime failed; retrying")
                    await runtime.get().sleep(_RETRY_S)
        finally:
            with runtime.get().move_on_after(1, shield=True):
                await self.marker_peers.aclose()


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
