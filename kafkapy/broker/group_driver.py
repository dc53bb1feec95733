"""The group coordinator's adapter to the coordinator runtime: its own rules around it.

`GroupCoordinator` is a plain state machine (no trio, no files); `CoordinatorRuntime` keeps it in
`__consumer_offsets` (ownership of the partitions, load by replay, append and wait for
replication, timers). What is the group coordinator's own lives here: it hands each request to
the coordinator, appends the records it returns as one record batch per partition and producer
(the topic is compacted by the log cleaner), answers the requests that completed - a JoinGroup
or SyncGroup may be answered later, by another member's request or a timer (`wait`) - and turns
a failed write into what each API answers.

Resource handling: the `Broker` builds one (`broker.group_coordinator`); `await ready()` loads
`__consumer_offsets` on first use (creating the topic if missing), and `serve()` is the server's
timer task (session expiry, rebalance, retention), which also loads it right after start-up so
the first consumer does not pay for it.

Transactions: TxnOffsetCommit records are appended as transactional batches of the producer;
they count once `on_transaction_marker` (called by whoever writes the marker) or, at load, the
marker in the log commits them.

Error handling: an unreadable record while loading is logged and skipped (a newer kafkapy may
have written it). The state must follow the log, so when an append fails (disk full, I/O error,
log offline) or is lost with the leadership, the driver replays that partition's log below the
failed records (the load path) and reverts the coordinator to it
(`GroupCoordinator.revert`; the replay runs on the event loop, about 10 ms per 1,000 records,
which compaction keeps few; a log that cannot be read either leaves the groups with what could
be read); requests waiting on a reverted group are answered with the error, and `finish` raises
`GroupWriteError`, which each handler turns into the code Kafka gives for a failed write of that
API (NOT_COORDINATOR for a storage error, so clients look the coordinator up again and retry).
Records that did not replicate in time but stay in the leader's log (`_STILL_IN_LOG`) revert only
their offset commits; membership and generations stay as written (`_FailedWrite.add_unreplicated`).
The broker stays up; the timer task logs and carries on. A partition that moves away drops its
coordinator; its waiting Join/SyncGroups are answered NOT_COORDINATOR.
"""

from __future__ import annotations

import functools
import itertools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from kafkapy.broker import runtime
from kafkapy.broker.clock import now_ms
from kafkapy.broker.config import BrokerConfig
from kafkapy.broker.config_rules import group_config_from
from kafkapy.broker.coordinator_runtime import (
    Appended,
    CoordinatorRuntime,
    MissingPartition,
    RuntimeHost,
)
from kafkapy.broker.internal_topics import log_batches
from kafkapy.coordinator import group as coordinator_group
from kafkapy.coordinator.group import CONSUMER_OFFSETS_TOPIC, offsets_partition_for
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import Record, decode_records, parse_control_record
from kafkapy.storage import PartitionLog
from kafkapy.storage.errors import StorageError

if TYPE_CHECKING:
    from kafkapy.coordinator.group import (
        Completion,
        GroupConfig,
        GroupCoordinator,
        GroupRecord,
        JoinGroupResult,
        Pending,
        Result,
        SyncGroupResult,
    )

__all__ = ["GroupDriver", "GroupWriteError"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Answer: TypeAlias = "JoinGroupResult | SyncGroupResult"


def _int(config: BrokerConfig, name: str, default: int) -> int:
    value = config.get(name)
    return int(value) if value is not None else default


# Kafka's translation of a failed append to __consumer_offsets into the coordinator's answer
# (GroupMetadataManager.storeOffsets / storeGroup): the client is sent to find the coordinator
# again, or told the commit was too big.
_WRITE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
_TOO_LARGE = (
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.INVALID_FETCH_SIZE,
)
#: replication waits that end with the records still in this leader's log, where they may yet
#: be committed (the ISR grows back) - or are truncated with a leadership change, which unloads
#: the coordinator anyway
_STILL_IN_LOG = (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


class GroupWriteError(Exception):
    """An append to `__consumer_offsets` failed; the coordinator was already reverted to the log.

    `cause` is the storage-side code (KAFKA_STORAGE_ERROR, MESSAGE_TOO_LARGE, ...), `groups` the
    groups whose records were lost and `response` what the operation would have answered, for
    APIs that report per group (DeleteGroups) and may have succeeded for the others.
    """

    def __init__(self, cause: ErrorCode, groups: frozenset[str], response: object) -> None:
        super().__init__(f"append to {CONSUMER_OFFSETS_TOPIC} failed: {cause.name}")
        self.cause = cause
        self.groups = groups
        self.response = response

    @property
    def commit_error(self) -> ErrorCode:
        """The OffsetCommit answer (too large -> INVALID_COMMIT_OFFSET_SIZE)."""
        if self.cause in _TOO_LARGE:
            return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
        return _WRITE_ERRORS.get(self.cause, self.cause)

    @property
    def group_error(self) -> ErrorCode:
        """The answer of the group APIs (Join/Sync/Leave/DeleteGroups, OffsetDelete)."""
        if self.cause in _TOO_LARGE:
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if self.cause is ErrorCode.REQUEST_TIMED_OUT:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return _WRITE_ERRORS.get(self.cause, self.cause)


@dataclass(slots=True)
class _FailedWrite:
    records: list[GroupRecord] = field(default_factory=list)
    partitions: set[int] = field(default_factory=set)
    cause: ErrorCode = ErrorCode.NONE
    #: where the unreplicated records start in each partition's log
    revert_to: dict[int, int] = field(default_factory=dict)
    #: groups whose membership records stay in the log unreplicated (kept, not reverted)
    kept: set[str] = field(default_factory=set)

    def add(self, partition: int, records: list[GroupRecord]) -> None:
        self.records.extend(records)
        self.partitions.add(partition)

    def add_unreplicated(self, partition: int, records: list[GroupRecord]) -> None:
        """Records that stay in the leader's log: only the offset commits are reverted.

        Why: a commit the client was told failed must not be served by OffsetFetch (Kafka keeps
        it pending until written). But membership and generations are not undone: the log
        holds them and may still commit them, and a coordinator that forgot members the log
        keeps hands the next coordinator stale members (a rebalance then waits a whole session
        timeout for them) and reuses generation ids. Kafka's coordinator never reverts
        membership on a failed write either; the members are answered the error and rejoin.
        """
        self.add(partition, [r for r in records if isinstance(r.key, coordinator_group.OffsetCommitKey)])
        self.kept.update(r.group_id for r in records if not isinstance(r.key, coordinator_group.OffsetCommitKey))


@dataclass(slots=True)
class _Appended:
    """What one `finish` appended to a partition (it waits for its replication)."""

    start: int  # the log end before the first batch
    end: int  # the log end after the last batch
    records: list[GroupRecord] = field(default_factory=list)


def _error_code_of(exc: Exception) -> ErrorCode:
    if isinstance(exc, MissingPartition):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if isinstance(exc, StorageError | ProtocolError):
        return exc.error_code
    if isinstance(exc, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(slots=True)
class _Waiter:
    event: runtime.Event = field(default_factory=runtime.new_event)
    answer: Answer | None = None


class GroupDriver(CoordinatorRuntime["GroupCoordinator"]):
    def __init__(self, broker: RuntimeHost) -> None:
        self._ids = itertools.count(1)
        self._waiters: dict[int, _Waiter] = {}
        super().__init__(
            broker,
            topic=CONSUMER_OFFSETS_TOPIC,
            num_partitions=_int(broker.config, "offsets.topic.num.partitions", 50),
            partitioner=offsets_partition_for,
            replication_factor_key="offsets.topic.replication.factor",
        )

    # -- the runtime's interface -------------------------------------------------------------

    @functools.cached_property
    def config(self) -> GroupConfig:
        """The group settings, read from the broker's config when a first coordinator is built
        (the coordinator's classes load then, not at start)."""
        return group_config_from(self.broker.config)

    def new_coordinator(self, leader_epoch: int) -> GroupCoordinator:
        return coordinator_group.GroupCoordinator(self.config)

    async def activate(self, coordinator: GroupCoordinator) -> None:
        coordinator.load_complete(now_ms())

    def deactivate(self, coordinator: GroupCoordinator) -> None:
        """A coordinator is dropped: the Join/SyncGroups waiting in it get NOT_COORDINATOR, so
        their clients find the new coordinator."""
        moved = ErrorCode.NOT_COORDINATOR
        for group in coordinator.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    self._deliver(m.awaiting_join, coordinator_group.JoinGroupResult(moved, member_id=m.member_id))
                if m.awaiting_sync is not None:
                    self._deliver(m.awaiting_sync, coordinator_group.SyncGroupResult(moved))

    def describe(self, coordinator: GroupCoordinator) -> str:
        return f"{len(coordinator.groups)} groups"

    def held(self, coordinator: GroupCoordinator) -> tuple[int, str]:
        return len(coordinator.groups), "groups"

    def topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            # Kafka's offsets.topic.segment.bytes: small enough for the cleaner to get at
            "segment.bytes": str(
                _int(self.broker.config, "offsets.topic.segment.bytes", 104_857_600)
            ),
        }

    def replay_log(
        self, plog: PartitionLog, into: GroupCoordinator, start: int | None, end: int | None
    ) -> int:
        """Replay the batches of [start, end) into `into` (any thread if `into` is private)."""
        loaded = 0
        for data, pos, header in log_batches(plog, start, end):
            pid = header.producer_id if header.is_transactional else -1
            for record in decode_records(data, pos, header):
                try:
                    if header.is_control:
                        commit, _ = parse_control_record(record)
                        into.replay_transaction_marker(pid, commit)
                    elif record.key is not None:
                        into.replay_bytes(record.key, record.value, producer_id=pid)
                    loaded += 1
                except ProtocolError as exc:  # GroupRecordError or a bad marker
                    log.warning("skipping unreadable %s record: %s", CONSUMER_OFFSETS_TOPIC, exc)
        return loaded

    def next_deadline(self) -> int | None:
        deadlines = [d for c in self.coordinators() if (d := c.next_deadline()) is not None]
        return min(deadlines, default=None)

    async def fire_timers(self) -> None:
        for coordinator in self.coordinators():
            try:
                await self.finish(coordinator.poll(now_ms()))
            except GroupWriteError as exc:  # reverted; expiry retries at its next check
                log.warning("group coordinator timers: %s", exc)

    # -- requests ------------------------------------------------------------------------

    def next_request_id(self) -> int:
        return next(self._ids)

    async def finish(self, result: Result[T]) -> T | Pending:
        """Persist the records, answer completed requests, wake the timer task.

        Raises `GroupWriteError` when an append failed, after reverting the coordinator to the
        log and answering the requests that waited on the reverted groups. The answers wait
        until the records are replicated.
        """
        failed, appended = self._append(result.records)
        for partition, done in appended.items():
            code = await self.wait_replicated(partition, done.end)
            if code is not ErrorCode.NONE:
                log.warning("%s-%d did not replicate (%s): reverting %d group records",
                            CONSUMER_OFFSETS_TOPIC, partition, code.name, len(done.records))
                failed = failed or _FailedWrite(cause=code)
                if code in _STILL_IN_LOG:
                    failed.add_unreplicated(partition, done.records)
                else:
                    failed.add(partition, done.records)
                failed.revert_to[partition] = done.start
        completions = result.completions
        if failed is not None:
            completions = self._revert(failed, completions)
        for c in completions:
            self._deliver(c.request_id, c.response)
        self.wake(self.next_deadline())
        if failed is not None:
            groups = frozenset(r.group_id for r in failed.records) | failed.kept
            raise GroupWriteError(failed.cause, groups, result.response)
        return result.response

    def _deliver(self, request_id: int, answer: Answer) -> None:
        # finish may have awaited: the handler may not be waiting yet
        waiter = self._waiters.setdefault(request_id, _Waiter())
        waiter.answer = answer
        waiter.event.set()

    def forget(self, request_id: int) -> None:
        """The handler of `request_id` gave up (its write failed, or it was cancelled)."""
        self._waiters.pop(request_id, None)

    async def wait(self, request_id: int) -> Answer:
        """Wait for the answer to a request the coordinator reported PENDING.

        No completion can be missed: the handler calls this right after `finish` without an
        await in between, and only a later operation or timer can complete the request (`finish`
        may await, so answers are kept for handlers not yet waiting).
        """
        waiter = self._waiters.setdefault(request_id, _Waiter())
        try:
            await waiter.event.wait()
        finally:
            self._waiters.pop(request_id, None)
        assert waiter.answer is not None
        return waiter.answer

    def _append(
        self, records: list[GroupRecord]
    ) -> tuple[_FailedWrite | None, dict[int, _Appended]]:
        """One batch per `__consumer_offsets` partition and producer.

        Every batch is tried (a partition that works keeps its records); returns what failed,
        for `_revert` (None when everything was written), and the end offset and records of each appended partition, to wait for their replication.
        """
        appended: dict[int, _Appended] = {}
        batches: dict[tuple[int, int, int], list[GroupRecord]] = {}
        for r in records:
            partition = self.partition_for(r.group_id)
            batches.setdefault((partition, r.producer_id, r.producer_epoch), []).append(r)
        failed: _FailedWrite | None = None
        for (partition, producer_id, producer_epoch), group_records in batches.items():
            try:
                done = self.append(
                    partition,
                    [Record(i, 0, coordinator_group.encode_key(r.key), coordinator_group.encode_value(r.value))
                     for i, r in enumerate(group_records)],
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                )
            except Exception as exc:  # the state must follow the log whatever broke
                code = _error_code_of(exc)
                log.warning("append to %s-%d failed (%s): reverting %d group records to the log",
                            CONSUMER_OFFSETS_TOPIC, partition, exc, len(group_records),
                            exc_info=code is ErrorCode.UNKNOWN_SERVER_ERROR)
                failed = failed or _FailedWrite(cause=code)
                failed.add(partition, group_records)
                continue
            _note(appended, partition, done, group_records)
        return failed, appended

    def _revert(self, failed: _FailedWrite, completions: list[Completion]) -> list[Completion]:
        """Bring the coordinators of the failed partitions back to what their logs hold below
        the failed records (`committed_end`); returns the completions to deliver instead."""
        error = GroupWriteError(failed.cause, frozenset(), None).group_error
        if failed.kept:  # their state stays; the requests that waited on it get the error
            completions = [
                _as_error(c, error) if c.group_id in failed.kept else c for c in completions
            ]
        for partition in sorted(failed.partitions):
            records = [r for r in failed.records if self.partition_for(r.group_id) == partition]
            if not records:
                continue
            coordinator = self.coordinator_of_partition(partition)
            if coordinator is None:  # moved away meanwhile: its answers become the error
                groups = {r.group_id for r in records}
                completions = [
                    _as_error(c, error) if c.group_id in groups else c for c in completions
                ]
                continue
            log_state = self.new_coordinator(0)
            try:
                plog = self.partition_log(partition)
                if plog is not None:
                    end = self.committed_end(partition, plog, failed.revert_to.get(partition))
                    self.replay_log(plog, log_state, None, end)
            except Exception:  # unreadable too: the groups fall back to what could be read
                log.exception("cannot re-read %s-%d", CONSUMER_OFFSETS_TOPIC, partition)
            completions = coordinator.revert(
                records, log_state, error=error, now_ms=now_ms(), completions=completions
            ).completions
        return completions

    def on_transaction_marker(
        self, producer_id: int, commit: bool, partition: int | None = None
    ) -> None:
        """Hook for the transaction marker writer: call it after appending a commit/abort
        marker of `producer_id` to a `__consumer_offsets` partition (the same effect replaying
        that marker has at load). Only that partition's coordinator holds the producer's
        offsets; one still loading replays the marker from the log."""
        if partition is None:
            targets = self.coordinators()
        else:
            found = self.coordinator_of_partition(partition)
            targets = [] if found is None else [found]
        for coordinator in targets:
            coordinator.replay_transaction_marker(producer_id, commit)


def _note(
    appended: dict[int, _Appended], partition: int, done: Appended, records: list[GroupRecord]
) -> None:
    """Add one batch to what `finish` appended to the partition."""
    seen = appended.setdefault(partition, _Appended(done.start, done.end))
    seen.end = done.end
    seen.records.extend(records)


def _as_error(c: Completion, error: ErrorCode) -> Completion:
    """A completion answered `error` instead (its group's coordinator moved away)."""
    r = c.response
    answer: Answer = (
        coordinator_group.JoinGroupResult(error, member_id=r.member_id)
        if isinstance(r, coordinator_group.JoinGroupResult)
        else coordinator_group.SyncGroupResult(error)
    )
    return coordinator_group.Completion(c.request_id, answer, c.group_id)
