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

Partitioned mode (cluster mode, docs/cluster.md; also selectable on one node for tests): one
`GroupCoordinator` per `__consumer_offsets` partition this broker leads (`owned`), loaded from
that partition's log in a worker thread when the leadership arrives (`on_become_leader`; the
group's requests answer COORDINATOR_LOAD_IN_PROGRESS meanwhile) and dropped when it leaves
(`on_become_follower`: NOT_COORDINATOR, and so for waiting Join/SyncGroups, so clients look the
coordinator up again). `coordinator_for(group_id)` is how handlers reach the right one. Appends
are answered only once the partition's high watermark passed them (`wait_replicated`); a failed
wait reverts the coordinator to the log before those records, as a failed append does.
Single-node mode keeps the one coordinator of every partition, loaded at once, as before.
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
from kafkapy.storage import PartitionLog
from kafkapy.storage.errors import KafkaStorageError, StorageError

__all__ = [
    "GroupDriver",
    "GroupWriteError",
    "existing_group_driver",
    "group_config_from",
    "group_driver",
    "install_group_driver",
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
        consumer_heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        consumer_session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        consumer_assignors=tuple(config.get_list("group.consumer.assignors")) or ("uniform",),
        consumer_max_size=config.get_int("group.consumer.max.size"),
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
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.INVALID_FETCH_SIZE,
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
    #: partitioned mode: where the unreplicated records start in each partition's log
    revert_to: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Appended:
    """What one `finish` appended to a partition (partitioned mode waits for it)."""

    start: int  # the log end before the first batch
    end: int  # the log end after the last batch
    records: list[GroupRecord] = field(default_factory=list)


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
    def __init__(self, broker: Broker, *, partitioned: bool | None = None) -> None:
        self.broker = broker
        self.config = group_config_from(broker.config)
        # single-node mode: the coordinator of every partition
        self.coordinator = GroupCoordinator(self.config)
        self.num_partitions = max(_int(broker.config, "offsets.topic.num.partitions", 50), 1)
        self.partitioned = cluster_of(broker) is not None if partitioned is None else partitioned
        self.owned: OwnedPartitions[GroupCoordinator] = OwnedPartitions()
        self._ids = itertools.count(1)
        self._waiters: dict[int, _Waiter] = {}
        self._changed = trio.Event()
        self._loading: trio.Event | None = None
        self._sleep_until: int | None = None  # the timer task's wake-up time while it sleeps
        self._nursery: trio.Nursery | None = None  # run()'s, for partition loads
        self._queued_loads: list[tuple[int, int]] = []  # leaderships that came before run()
        self.loaded = False
        if cluster_of(broker) is not None:
            register_role_listener(broker, self, CONSUMER_OFFSETS_TOPIC)

    # -- which coordinator -----------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        if self.partitioned:
            count = partition_count(self.broker, CONSUMER_OFFSETS_TOPIC)
            if count:
                self.num_partitions = count
        return offsets_partition_for(group_id, self.num_partitions)

    def coordinator_for(self, group_id: str) -> GroupCoordinator | ErrorCode:
        """The coordinator of the group, or NOT_COORDINATOR (its partition is led elsewhere) /
        COORDINATOR_LOAD_IN_PROGRESS (being loaded here)."""
        if not self.partitioned:
            return self.coordinator
        return self.owned.lookup(self.partition_for(group_id))

    def coordinators(self) -> list[GroupCoordinator]:
        """Every loaded coordinator (ListGroups, timers)."""
        if not self.partitioned:
            return [self.coordinator]
        return [c for _, c in sorted(self.owned.loaded().items())]

    def _coordinator_of_partition(self, partition: int) -> GroupCoordinator | None:
        if not self.partitioned:
            return self.coordinator
        found = self.owned.lookup(partition)
        return None if isinstance(found, ErrorCode) else found

    # -- partition leadership (partitioned mode) ---------------------------------------------

    def on_become_leader(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Role listener: load the partition's groups (in the background; until then its
        groups answer COORDINATOR_LOAD_IN_PROGRESS)."""
        if topic != CONSUMER_OFFSETS_TOPIC or not self.partitioned:
            return
        previous = self.owned.lookup(partition)
        if not self.owned.begin_load(partition, leader_epoch):
            return
        if not isinstance(previous, ErrorCode):  # led again in a newer epoch: reload
            self._release(previous)
        if self._nursery is None:
            self._queued_loads.append((partition, leader_epoch))
        else:
            self._nursery.start_soon(self._load_partition, partition, leader_epoch)

    def on_become_follower(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Role listener: forget the partition's groups; requests waiting in a rebalance are
        answered NOT_COORDINATOR so their clients find the new coordinator."""
        if topic != CONSUMER_OFFSETS_TOPIC or not self.partitioned:
            return
        coordinator = self.owned.drop(partition)
        if coordinator is None:
            return
        self._release(coordinator)
        log.info(
            "%s-%d moved away (leader epoch %d): unloaded %d groups",
            CONSUMER_OFFSETS_TOPIC,
            partition,
            leader_epoch,
            len(coordinator.groups),
        )

    def _release(self, coordinator: GroupCoordinator) -> None:
        """A coordinator is dropped: the Join/SyncGroups waiting in it get NOT_COORDINATOR."""
        moved = ErrorCode.NOT_COORDINATOR
        for group in coordinator.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    self._deliver(m.awaiting_join, JoinGroupResult(moved, member_id=m.member_id))
                if m.awaiting_sync is not None:
                    self._deliver(m.awaiting_sync, SyncGroupResult(moved))

    def _plog(self, partition: int) -> PartitionLog | None:
        if cluster_of(self.broker) is None:
            return internal_partition_log(self.broker, CONSUMER_OFFSETS_TOPIC, partition)
        return self.broker.partition_log(CONSUMER_OFFSETS_TOPIC, partition) or self.broker.logs.get(
            CONSUMER_OFFSETS_TOPIC, partition
        )

    async def _load_partition(self, partition: int, leader_epoch: int) -> None:
        """Replay the partition's log into a new coordinator (the bulk in a worker thread, the
        tail appended meanwhile - markers - on the trio thread) and install it, unless the
        leadership changed in between."""
        started = now_ms()
        coordinator = GroupCoordinator(self.config)
        loaded = 0
        try:
            plog = self._plog(partition)
            if plog is not None:
                end = plog.log_end_offset
                loaded = await trio.to_thread.run_sync(
                    self._replay_log, plog, coordinator, None, end
                )
                loaded += self._replay_log(plog, coordinator, end, None)
        except Exception:  # storage trouble: stay unloaded so clients keep retrying elsewhere
            log.exception("loading %s-%d failed", CONSUMER_OFFSETS_TOPIC, partition)
            if self.owned.is_current(partition, leader_epoch):
                self.owned.drop(partition)
            return
        coordinator.load_complete(now_ms())
        if self.owned.finish_load(partition, leader_epoch, coordinator):
            log.info(
                "loaded %s-%d (leader epoch %d): %d records, %d groups in %d ms",
                CONSUMER_OFFSETS_TOPIC,
                partition,
                leader_epoch,
                loaded,
                len(coordinator.groups),
                now_ms() - started,
            )
            self._changed.set()

    # -- start-up ------------------------------------------------------------------------

    async def ensure_loaded(self) -> None:
        """Create `__consumer_offsets` if needed and replay it into the coordinator (once).

        Concurrent callers wait for the first one. A new topic has nothing to load, so the
        coordinator is ready at once; its 50 empty logs (about a second of fsyncs on a slow
        disk) are created in a worker thread meanwhile, and `_append` creates the one it needs
        first on demand. A crash in between is harmless: start-up creates the logs of every
        known topic.
        """
        if self.partitioned and not self.loaded:
            # partitions load as their leadership arrives; one node still makes the topic
            self.loaded = True
            if cluster_of(self.broker) is None and CONSUMER_OFFSETS_TOPIC not in self.broker.topics:
                await create_internal_logs(self.broker, self._register_topic())
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

    def _topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            # Kafka's offsets.topic.segment.bytes: small enough for the cleaner to get at
            "segment.bytes": str(
                _int(self.broker.config, "offsets.topic.segment.bytes", 104_857_600)
            ),
        }

    def _register_topic(self) -> TopicInfo:
        return register_internal_topic(
            self.broker, CONSUMER_OFFSETS_TOPIC, self.num_partitions, self._topic_configs()
        )

    async def ensure_topic(self) -> bool:
        """Cluster mode: does `__consumer_offsets` exist? The first call asks the controller
        to create it (FindCoordinator answers COORDINATOR_NOT_AVAILABLE until it is there)."""
        if cluster_of(self.broker) is None:
            return True
        return await ensure_cluster_topic(
            self.broker,
            CONSUMER_OFFSETS_TOPIC,
            self.num_partitions,
            self._topic_configs(),
            "offsets.topic.replication.factor",
        )

    def _partition_log(self, partition: int) -> PartitionLog:
        plog = self._plog(partition)
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

    def _replay_partition(
        self, partition: int, into: GroupCoordinator, end: int | None = None
    ) -> int:
        """Replay one `__consumer_offsets` partition's log into `into`; returns the number of
        records read. Used at start-up and to revert the state after a failed append."""
        plog = (
            self.broker.partition_log(CONSUMER_OFFSETS_TOPIC, partition)
            if cluster_of(self.broker) is None
            else self._plog(partition)
        )
        if plog is None:
            return 0
        return self._replay_log(plog, into, None, end)

    @staticmethod
    def _replay_log(
        plog: PartitionLog, into: GroupCoordinator, start: int | None, end: int | None
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

    # -- requests ------------------------------------------------------------------------

    def next_request_id(self) -> int:
        return next(self._ids)

    async def finish(self, result: Result[T]) -> T | Pending:
        """Persist the records, answer completed requests, wake the timer task.

        Raises `GroupWriteError` when an append failed, after reverting the coordinator to the
        log and answering the requests that waited on the reverted groups. On one node nothing
        here awaits; in partitioned mode the answers wait until the records are replicated.
        """
        failed, appended = self._append(result.records)
        for partition, done in appended.items():
            code = await wait_replicated(self.broker, CONSUMER_OFFSETS_TOPIC, partition, done.end)
            if code is not ErrorCode.NONE:
                log.warning(
                    "%s-%d did not replicate (%s): reverting %d group records",
                    CONSUMER_OFFSETS_TOPIC,
                    partition,
                    code.name,
                    len(done.records),
                )
                failed = failed or _FailedWrite(cause=code)
                failed.records.extend(done.records)
                failed.partitions.add(partition)
                failed.revert_to[partition] = done.start
        completions = result.completions
        if failed is not None:
            completions = self._revert(failed, completions)
        for c in completions:
            self._deliver(c.request_id, c.response)
        # wake the timer task only if a timer now fires before the time it sleeps until
        deadline = self._next_deadline()
        if deadline is not None and (self._sleep_until is None or deadline < self._sleep_until):
            self._changed.set()
        if failed is not None:
            groups = frozenset(r.group_id for r in failed.records)
            raise GroupWriteError(failed.cause, groups, result.response)
        return result.response

    def _deliver(self, request_id: int, answer: Answer) -> None:
        if self.partitioned:  # finish may have awaited: the handler may not be waiting yet
            waiter = self._waiters.setdefault(request_id, _Waiter())
        else:
            found = self._waiters.get(request_id)
            if found is None:
                return
            waiter = found
        waiter.answer = answer
        waiter.event.set()

    def forget(self, request_id: int) -> None:
        """The handler of `request_id` gave up (its write failed, or it was cancelled)."""
        self._waiters.pop(request_id, None)

    async def wait(self, request_id: int) -> Answer:
        """Wait for the answer to a request the coordinator reported PENDING.

        No completion can be missed: the handler calls this right after `finish` without an
        await in between, and only a later operation or timer can complete the request (in
        partitioned mode `finish` may await, so answers are kept for handlers not yet waiting).
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
        """One batch per `__consumer_offsets` partition through the normal append path.

        Every batch is tried (a partition that works keeps its records); returns what failed,
        for `_revert` (None when everything was written), and in partitioned mode the end
        offset and records of each appended partition, to wait for their replication.
        """
        appended: dict[int, _Appended] = {}
        if not records:
            return None, appended
        batches: dict[tuple[int, int, int], list[GroupRecord]] = {}
        for r in records:
            partition = self.partition_for(r.group_id)
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
                    base_timestamp=now,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    is_transactional=producer_id >= 0,
                )
                epoch = self.owned.leader_epoch(partition) if self.partitioned else None
                before = plog.log_end_offset
                plog.append(data, now_ms=now, leader_epoch=LEADER_EPOCH if epoch is None else epoch)
            except Exception as exc:  # the state must follow the log whatever broke
                code = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if isinstance(exc, _MissingPartition)
                    else _error_code_of(exc)
                )
                log.warning(
                    "append to %s-%d failed (%s): reverting %d group records to the log",
                    CONSUMER_OFFSETS_TOPIC,
                    partition,
                    exc,
                    len(group_records),
                    exc_info=code is ErrorCode.UNKNOWN_SERVER_ERROR,
                )
                failed = failed or _FailedWrite(cause=code)
                failed.records.extend(group_records)
                failed.partitions.add(partition)
                continue
            self.broker.after_append(CONSUMER_OFFSETS_TOPIC, partition, plog)
            if self.partitioned:
                done = appended.setdefault(partition, _Appended(before, before))
                done.end = plog.log_end_offset
                done.records.extend(group_records)
        return failed, appended

    def _revert(self, failed: _FailedWrite, completions: list[Completion]) -> list[Completion]:
        """Bring the coordinator back to what the log of the failed partitions holds (replayed
        by the start-up load path; in partitioned mode the log below the failed records and
        below the high watermark, since there the failed records are in the log, replicated too
        few times or not at all); returns the completions to deliver instead."""
        error = GroupWriteError(failed.cause, frozenset(), None).group_error
        if not self.partitioned:
            log_state = GroupCoordinator(self.coordinator.config)
            for partition in sorted(failed.partitions):
                try:
                    self._replay_partition(partition, log_state)
                except Exception:  # unreadable too: the groups fall back to what could be read
                    log.exception("cannot re-read %s-%d", CONSUMER_OFFSETS_TOPIC, partition)
            return self.coordinator.revert(
                failed.records, log_state, error=error, now_ms=now_ms(), completions=completions
            ).completions
        for partition in sorted(failed.partitions):
            records = [r for r in failed.records if self.partition_for(r.group_id) == partition]
            coordinator = self._coordinator_of_partition(partition)
            if coordinator is None:  # moved away meanwhile: its answers become the error
                groups = {r.group_id for r in records}
                completions = [
                    _as_error(c, error) if c.group_id in groups else c for c in completions
                ]
                continue
            log_state = GroupCoordinator(self.config)
            plog = self._plog(partition)
            try:
                if plog is not None:
                    # the log as it was before the failed records (and never above the HW)
                    end = min(
                        plog.high_watermark, failed.revert_to.get(partition, plog.high_watermark)
                    )
                    self._replay_log(plog, log_state, None, end)
            except Exception:
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
        that marker has at load). In partitioned mode only that partition's coordinator holds
        the producer's offsets; one still loading replays the marker from the log."""
        if partition is None or not self.partitioned:
            targets = self.coordinators()
        else:
            found = self._coordinator_of_partition(partition)
            targets = [] if found is None else [found]
        for coordinator in targets:
            coordinator.replay_transaction_marker(producer_id, commit)

    # -- timers --------------------------------------------------------------------------

    def _next_deadline(self) -> int | None:
        if not self.partitioned:
            return self.coordinator.next_deadline()
        deadlines = [
            d for c in self.owned.loaded().values() if (d := c.next_deadline()) is not None
        ]
        return min(deadlines, default=None)

    async def run(self) -> None:
        """Fire the coordinators' timers at their deadlines and load the partitions whose
        leadership arrives, forever (cancel to stop)."""
        await self.ensure_loaded()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for partition, epoch in self._queued_loads:
                nursery.start_soon(self._load_partition, partition, epoch)
            self._queued_loads.clear()
            try:
                await self._run_timers()
            finally:
                self._nursery = None

    async def _run_timers(self) -> None:
        while True:
            self._changed = trio.Event()
            deadline = self._sleep_until = self._next_deadline()
            if deadline is None:
                await self._changed.wait()
            else:
                delay_s = (deadline - now_ms()) / 1000
                if delay_s > 0:
                    with trio.move_on_after(delay_s):
                        await self._changed.wait()
            self._sleep_until = None
            for coordinator in self.coordinators():
                try:
                    await self.finish(coordinator.poll(now_ms()))
                except GroupWriteError as exc:  # reverted; expiry retries at its next check
                    log.warning("group coordinator timers: %s", exc)
                except Exception:
                    log.exception("group coordinator timers failed")
                    await trio.sleep(0.1)


def _as_error(c: Completion, error: ErrorCode) -> Completion:
    """A completion answered `error` instead (its group's coordinator moved away)."""
    r = c.response
    answer: Answer = (
        JoinGroupResult(error, member_id=r.member_id)
        if isinstance(r, JoinGroupResult)
        else SyncGroupResult(error)
    )
    return Completion(c.request_id, answer, c.group_id)


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


def existing_group_driver(broker: Broker) -> GroupDriver | None:
    """The broker's driver if one was created (no side effect: for read-only views)."""
    return _DRIVERS.get(broker)


async def run_group_driver(broker: Broker) -> None:
    """The server's long-lived task for group timers (session expiry, rebalance, retention).

    It also creates and loads `__consumer_offsets` right after start-up, so the first consumer
    does not pay for it.
    """
    driver = _DRIVERS.get(broker)
    if driver is None:
        driver = _DRIVERS[broker] = GroupDriver(broker)
    await driver.run()


def install_group_driver(broker: Broker, driver: GroupDriver) -> None:
    """Make `driver` the broker's own (one built by hand, e.g. partitioned mode on one node
    for tests); call it before the server starts or any request arrives."""
    _DRIVERS[broker] = driver
