"""The trio driver of the group coordinator: persistence, timers and pending responses.

Why a driver: `GroupCoordinator` is a plain state machine (no trio, no files), so that the
cluster issue can later run one per `__consumer_offsets` partition leader. This module is the
runtime around it, after Kafka's coordinator runtime: it hands each request to the coordinator,
appends the records it returns to `__consumer_offsets` as one record batch per partition (the
normal log path; the topic is compacted by the log cleaner), answers the requests that
completed, and sleeps until `next_deadline()` to run the timers.

Resource handling: one `GroupDriver` per `Broker` (`await group_driver(broker)`), created on
first use; it loads `__consumer_offsets` the first time (creating the topic if missing).
`run_group_driver(broker)` is the long-lived timer task the server starts; cancelling it is the
way to stop it. Without it (in-process handler tests) timers do not fire.

Transactions: TxnOffsetCommit records are appended as transactional batches of the producer;
they count once `on_transaction_marker` (called by whoever writes the marker) or, at load, the
marker in the log commits them.

Error handling: an unreadable record while loading is logged and skipped (a newer kafkapy may
have written it). The state must follow the log, so when an append fails (disk full, I/O error,
log offline) the driver replays that partition's log (the start-up load path) and reverts the
coordinator to it (`GroupCoordinator.revert`; the replay runs on the event loop, about 10 ms per
1,000 records, which compaction keeps few; a log that cannot be read either leaves the groups with
what could be read); requests waiting on a reverted group are answered with the error, and `finish` raises `GroupWriteError`, which each handler turns into the code
Kafka gives for a failed write of that API (NOT_COORDINATOR for a storage error, so clients look
the coordinator up again and retry). The broker stays up; the timer task logs and carries on.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from kafkapy.coordinator.group import (
    CONSUMER_OFFSETS_TOPIC,
    Completion,
    GroupConfig,
    GroupCoordinator,
    GroupRecord,
    JoinGroupResult,
    Pending,
    Result,
    SyncGroupResult,
    encode_key,
    encode_value,
    offsets_partition_for,
)
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import (
    Record,
    build_batch,
    decode_records,
    parse_control_record,
)
from kafkapy.server.broker import LEADER_EPOCH, Broker, now_ms
from kafkapy.server.config import BrokerConfig
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
    "GroupDriver",
    "GroupWriteError",
    "group_config_from",
    "group_driver",
    "run_group_driver",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
Answer = JoinGroupResult | SyncGroupResult


def _int(config: BrokerConfig, name: str, default: int) -> int:
    value = config.get(name)
    return int(value) if value is not None else default


def group_config_from(config: BrokerConfig) -> GroupConfig:
    """Kafka's broker settings for groups (every key is in the broker's config table)."""
    return GroupConfig(
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        max_size=config.get_int("group.max.size"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
    )


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
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE
)


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


def _error_code_of(exc: Exception) -> ErrorCode:
    if isinstance(exc, StorageError | ProtocolError):
        return exc.error_code
    if isinstance(exc, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(slots=True)
class _Waiter:
    event: trio.Event = field(default_factory=trio.Event)
    answer: Answer | None = None


class GroupDriver:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.coordinator = GroupCoordinator(group_config_from(broker.config))
        self.num_partitions = max(_int(broker.config, "offsets.topic.num.partitions", 50), 1)
        self._ids = itertools.count(1)
        self._waiters: dict[int, _Waiter] = {}
        self._changed = trio.Event()
        self._loading: trio.Event | None = None
        self._sleep_until: int | None = None  # the timer task's wake-up time while it sleeps
        self.loaded = False

    # -- start-up ------------------------------------------------------------------------

    async def ensure_loaded(self) -> None:
        """Create `__consumer_offsets` if needed and replay it into the coordinator (once).

        Concurrent callers wait for the first one. A new topic has nothing to load, so the
        coordinator is ready at once; its 50 empty logs (about a second of fsyncs on a slow
        disk) are created in a worker thread meanwhile, and `_append` creates the one it needs
        first on demand. A crash in between is harmless: start-up creates the logs of every
        known topic.
        """
        while not self.loaded:
            if self._loading is not None:
                await self._loading.wait()
                continue
            self._loading = trio.Event()
            try:
                if CONSUMER_OFFSETS_TOPIC in self.broker.topics:
                    self._load()
                else:
                    info = self._register_topic()
                    self.coordinator.load_complete(now_ms())
                    self.loaded = True
                    await create_internal_logs(self.broker, info)
            finally:
                self._loading.set()
                self._loading = None

    def _register_topic(self) -> TopicInfo:
        return register_internal_topic(
            self.broker, CONSUMER_OFFSETS_TOPIC, self.num_partitions,
            {
                "cleanup.policy": "compact",
                # Kafka's offsets.topic.segment.bytes: small enough for the cleaner to get at
                "segment.bytes": str(
                    _int(self.broker.config, "offsets.topic.segment.bytes", 104_857_600)
                ),
            },
        )

    def _partition_log(self, partition: int) -> PartitionLog:
        plog = internal_partition_log(self.broker, CONSUMER_OFFSETS_TOPIC, partition)
        if plog is None:
            raise _MissingPartition(f"{CONSUMER_OFFSETS_TOPIC}-{partition} does not exist")
        return plog

    def _load(self) -> None:
        info = self.broker.topics.get(CONSUMER_OFFSETS_TOPIC)
        assert info is not None
        self.num_partitions = info.partitions
        loaded = 0
        for partition in range(info.partitions):
            loaded += self._replay_partition(partition, self.coordinator)
        self.coordinator.load_complete(now_ms())
        self.loaded = True
        log.info(
            "group coordinator loaded %d records: %d groups", loaded, len(self.coordinator.groups)
        )

    def _replay_partition(self, partition: int, into: GroupCoordinator) -> int:
        """Replay one `__consumer_offsets` partition's log into `into`; returns the number of
        records read. Used at start-up and to revert the state after a failed append."""
        plog = self.broker.partition_log(CONSUMER_OFFSETS_TOPIC, partition)
        if plog is None:
            return 0
        loaded = 0
        for data, pos, header in log_batches(plog):
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

    # -- requests ------------------------------------------------------------------------

    def next_request_id(self) -> int:
        return next(self._ids)

    def finish(self, result: Result[T]) -> T | Pending:
        """Persist the records, answer completed requests, wake the timer task.

        Raises `GroupWriteError` when an append failed, after reverting the coordinator to the
        log and answering the requests that waited on the reverted groups.
        """
        failed = self._append(result.records)
        completions = result.completions
        if failed is not None:
            completions = self._revert(failed, completions)
        for c in completions:
            waiter = self._waiters.get(c.request_id)
            if waiter is not None:
                waiter.answer = c.response
                waiter.event.set()
        # wake the timer task only if a timer now fires before the time it sleeps until
        deadline = self.coordinator.next_deadline()
        if deadline is not None and (self._sleep_until is None or deadline < self._sleep_until):
            self._changed.set()
        if failed is not None:
            groups = frozenset(r.group_id for r in failed.records)
            raise GroupWriteError(failed.cause, groups, result.response)
        return result.response

    async def wait(self, request_id: int) -> Answer:
        """Wait for the answer to a request the coordinator reported PENDING.

        No completion can be missed: the handler calls this right after `finish` without an
        await in between, and only a later operation or timer can complete the request.
        """
        waiter = self._waiters.setdefault(request_id, _Waiter())
        try:
            await waiter.event.wait()
        finally:
            self._waiters.pop(request_id, None)
        assert waiter.answer is not None
        return waiter.answer

    def _append(self, records: list[GroupRecord]) -> _FailedWrite | None:
        """One batch per `__consumer_offsets` partition through the normal append path.

        Every batch is tried (a partition that works keeps its records); what failed is
        returned for `_revert`, None when everything was written.
        """
        if not records:
            return None
        batches: dict[tuple[int, int, int], list[GroupRecord]] = {}
        for r in records:
            partition = offsets_partition_for(r.group_id, self.num_partitions)
            batches.setdefault((partition, r.producer_id, r.producer_epoch), []).append(r)
        now = now_ms()
        failed: _FailedWrite | None = None
        for (partition, producer_id, producer_epoch), group_records in batches.items():
            try:
                plog = self._partition_log(partition)
                data = build_batch(
                    [
                        Record(i, 0, encode_key(r.key), encode_value(r.value))
                        for i, r in enumerate(group_records)
                    ],
                    base_timestamp=now, producer_id=producer_id,
                    producer_epoch=producer_epoch, is_transactional=producer_id >= 0,
                )
                plog.append(data, now_ms=now, leader_epoch=LEADER_EPOCH)
            except Exception as exc:  # the state must follow the log whatever broke
                code = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if isinstance(exc, _MissingPartition) else _error_code_of(exc)
                )
                log.warning(
                    "append to %s-%d failed (%s): reverting %d group records to the log",
                    CONSUMER_OFFSETS_TOPIC, partition, exc, len(group_records),
                    exc_info=code is ErrorCode.UNKNOWN_SERVER_ERROR,
                )
                failed = failed or _FailedWrite(cause=code)
                failed.records.extend(group_records)
                failed.partitions.add(partition)
                continue
            self.broker.after_append(CONSUMER_OFFSETS_TOPIC, partition, plog)
        return failed

    def _revert(self, failed: _FailedWrite, completions: list[Completion]) -> list[Completion]:
        """Bring the coordinator back to what the log of the failed partitions holds (replayed
        by the start-up load path); returns the completions to deliver instead."""
        log_state = GroupCoordinator(self.coordinator.config)
        for partition in sorted(failed.partitions):
            try:
                self._replay_partition(partition, log_state)
            except Exception:  # unreadable too: the groups fall back to what could be read
                log.exception("cannot re-read %s-%d", CONSUMER_OFFSETS_TOPIC, partition)
        error = GroupWriteError(failed.cause, frozenset(), None).group_error
        return self.coordinator.revert(
            failed.records, log_state, error=error, now_ms=now_ms(), completions=completions
        ).completions

    def on_transaction_marker(self, producer_id: int, commit: bool) -> None:
        """Hook for the transaction marker writer: call it after appending a commit/abort
        marker of `producer_id` to a `__consumer_offsets` partition (the same effect replaying
        that marker has at load)."""
        self.coordinator.replay_transaction_marker(producer_id, commit)

    # -- timers --------------------------------------------------------------------------

    async def run(self) -> None:
        """Fire the coordinator's timers at their deadlines, forever (cancel to stop)."""
        await self.ensure_loaded()
        while True:
            self._changed = trio.Event()
            deadline = self._sleep_until = self.coordinator.next_deadline()
            if deadline is None:
                await self._changed.wait()
            else:
                delay_s = (deadline - now_ms()) / 1000
                if delay_s > 0:
                    with trio.move_on_after(delay_s):
                        await self._changed.wait()
            self._sleep_until = None
            try:
                self.finish(self.coordinator.poll(now_ms()))
            except GroupWriteError as exc:  # reverted; expiry retries at its next check
                log.warning("group coordinator timers: %s", exc)
            except Exception:
                log.exception("group coordinator timers failed")
                await trio.sleep(0.1)


class _MissingPartition(KafkaStorageError):
    """The `__consumer_offsets` partition of a group does not exist (COORDINATOR_NOT_AVAILABLE)."""


_DRIVERS: weakref.WeakKeyDictionary[Broker, GroupDriver] = weakref.WeakKeyDictionary()


async def group_driver(broker: Broker) -> GroupDriver:
    """The broker's driver, created and loaded on first use."""
    driver = _DRIVERS.get(broker)
    if driver is None:
        driver = _DRIVERS[broker] = GroupDriver(broker)
    await driver.ensure_loaded()
    return driver


async def run_group_driver(broker: Broker) -> None:
    """The server's long-lived task for group timers (session expiry, rebalance, retention).

    It also creates and loads `__consumer_offsets` right after start-up, so the first consumer
    does not pay for it.
    """
    driver = _DRIVERS.get(broker)
    if driver is None:
        driver = _DRIVERS[broker] = GroupDriver(broker)
    await driver.run()

