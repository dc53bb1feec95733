"""The trio runtime shared by the group and the transaction coordinator (Kafka's
CoordinatorRuntime): everything about keeping a plain state machine's durable state in a
compacted internal topic, whatever the records mean.

Why one runtime: `GroupCoordinator` and `TransactionCoordinator` are plain classes (no trio, no
files), and both need the same things around them - an internal topic (`__consumer_offsets`,
`__transaction_state`) created on first use, the state rebuilt by replaying its log, one
coordinator per partition this broker leads, appends that are answered only once replicated and
reverted when they fail, and a task that fires timers. `CoordinatorRuntime[C]` does those; a
coordinator's adapter (`GroupDriver`, `TxnDriver`) subclasses it and supplies the small typed
interface below (the abstract methods): how to build its state machine, how to replay a log into
it, what to do once one is loaded or dropped, and its timers. Its own rules - what a failed write
answers, markers, pending responses - stay in the adapter.

Ownership: the `Broker` builds one runtime per coordinator (`broker.group_coordinator`,
`broker.txn_coordinator`); handlers reach them through the broker. `serve()` is the long-lived task
the server starts; cancelling it stops it. Without it (in-process tests) timers do not fire and
partition loads stay queued.

One coordinator per partition of the internal topic this broker leads, for one node (a quorum
of one) as for many (docs/cluster.md): the runtime is a role listener; `on_become_leader` loads
the partition into a new coordinator in the background (the log read in a worker thread, then
the tail appended meanwhile on the trio thread; its keys answer COORDINATOR_LOAD_IN_PROGRESS
meanwhile) and `on_become_follower` drops it (NOT_COORDINATOR), each load tied to the leader
epoch it started for (`OwnedPartitions`), so a stale load is discarded.

Logging: each partition's load is a DEBUG line; the loads that overlap (a broker's start, a
failover handing it many partitions) end in one INFO line, "loaded N groups from M
__consumer_offsets partitions in X ms", written when the last of them finishes.

Error handling: a partition whose log cannot be read stays unloaded (logged; clients keep
retrying); a failing timer run is logged and retried after `timer_retry_s`, so the runtime
never takes the server down.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, Self, TypeVar

from kafkapy.broker import runtime
from kafkapy.broker.clock import now_ms
from kafkapy.broker.internal_topics import (
    InternalTopicsHost,
    OwnedPartitions,
    RoleListener,
    ensure_cluster_topic,
    partition_count,
    wait_replicated,
)
from kafkapy.broker.log_state import LogState, PartitionLogStates
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.records import Record, build_batch
from kafkapy.storage import LogManager, PartitionLog
from kafkapy.storage.errors import KafkaStorageError

__all__ = ["Appended", "CoordinatorRuntime", "MissingPartition", "NotOwned", "RuntimeHost"]

log = logging.getLogger(__name__)

C = TypeVar("C")


class MissingPartition(KafkaStorageError):
    """The internal topic has no such partition (yet): the key's coordinator is not available."""


class NotOwned(KafkaStorageError):
    """The partition is no longer led here by the coordinator that made the records."""


@dataclass(frozen=True, slots=True)
class Appended:
    """Where one batch went: its partition's log end before and after it."""

    start: int
    end: int


class RuntimeHost(InternalTopicsHost, Protocol):
    """What a runtime uses of the broker it runs in, beyond the internal-topic helpers': its
    logs (an internal partition's log, also before the topic table has it), the append
    bookkeeping every leader append goes through, and the list of role listeners it joins.
    A Protocol for the reason `InternalTopicsHost` gives."""

    @property
    def logs(self) -> LogManager: ...
    @property
    def log_states(self) -> PartitionLogStates: ...
    @property
    def role_listeners(self) -> list[RoleListener]: ...

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None: ...
    def after_append(self, topic: str, partition: int, plog: PartitionLog) -> None: ...


@dataclass(slots=True)
class _LoadSummary:
    """The partition loads in flight and what the finished ones of this run held: a run ends
    when none is left in flight, and `finish` then gives its figures for the one INFO line."""

    in_flight: int = 0
    partitions: int = 0
    keys: int = 0
    noun: str = ""
    started_ms: int = 0

    def begin(self) -> None:
        if self.in_flight == 0:
            self.partitions, self.keys, self.started_ms = 0, 0, now_ms()
        self.in_flight += 1

    def finish(self, held: tuple[int, str] | None, at_ms: int) -> tuple[int, int, str, int] | None:
        """Count one finished load (`held`: None if it was not installed); the run's
        (partitions, keys, noun, elapsed ms) when it was the last in flight and loaded any."""
        self.in_flight = max(self.in_flight - 1, 0)
        if held is not None:
            self.partitions += 1
            self.keys += held[0]
            self.noun = held[1]
        if self.in_flight or not self.partitions:
            return None
        summary = (self.partitions, self.keys, self.noun, at_ms - self.started_ms)
        self.partitions = self.keys = 0
        return summary


class CoordinatorRuntime(ABC, Generic[C]):
    """Ownership, load by replay, append and replication, and timers of one internal topic."""

    #: pause after a timer run failed, before the next
    timer_retry_s = 0.1

    def __init__(
        self,
        broker: RuntimeHost,
        *,
        topic: str,
        num_partitions: int,
        partitioner: Callable[[str, int], int],
        replication_factor_key: str,
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.num_partitions = max(num_partitions, 1)
        self._partitioner = partitioner
        self._replication_factor_key = replication_factor_key
        self.owned: OwnedPartitions[C] = OwnedPartitions()
        self.loaded = False
        self.loaded_event = runtime.new_event()
        self._changed = runtime.new_event()
        self._sleep_until: int | None = None  # the timer task's wake-up time while it sleeps
        self._nursery: runtime.TaskGroup | None = None  # serve()'s: partition loads, background work
        self._queued_loads: list[tuple[int, int]] = []  # leaderships that came before serve()
        self._asking_controller = False  # ensure_topic's CreateTopics is in flight
        self._loads = _LoadSummary()
        # built with the broker, before any metadata image: no leadership can come earlier
        broker.role_listeners.append(self)

    # -- the coordinator's side (the typed interface an adapter implements) ------------------

    @abstractmethod
    def new_coordinator(self, leader_epoch: int) -> C:
        """An empty state machine for a partition led in `leader_epoch`."""

    @abstractmethod
    def replay_log(self, plog: PartitionLog, into: C, start: int | None, end: int | None) -> int:
        """Replay the batches of [start, end) of one log into `into`; the number of records.
        Runs in a worker thread while `into` is private to the load."""

    @abstractmethod
    async def activate(self, coordinator: C) -> None:
        """A loaded coordinator was installed (nothing awaited since): finish its load."""

    @abstractmethod
    def deactivate(self, coordinator: C) -> None:
        """A coordinator was dropped (its partition moved away, or is reloaded)."""

    @abstractmethod
    def describe(self, coordinator: C) -> str:
        """What a coordinator holds, for log lines ("3 groups")."""

    @abstractmethod
    def held(self, coordinator: C) -> tuple[int, str]:
        """How many keys a coordinator holds and what they are, for the load summary
        (3, "groups")."""

    @abstractmethod
    def topic_configs(self) -> dict[str, str]:
        """The internal topic's configs when it is created."""

    @abstractmethod
    def next_deadline(self) -> int | None:
        """When `fire_timers` must run next (wall-clock ms), None if no timer is set."""

    @abstractmethod
    async def fire_timers(self) -> None:
        """Run the timers that are due."""

    # -- which coordinator -------------------------------------------------------------------

    def partition_for(self, key: str) -> int:
        """The internal topic's partition of a group id / transactional id."""
        count = partition_count(self.broker, self.topic)
        if count:
            self.num_partitions = count
        return self._partitioner(key, self.num_partitions)

    def coordinator_for(self, key: str) -> C | ErrorCode:
        """The key's coordinator, or NOT_COORDINATOR (its partition is led elsewhere) /
        COORDINATOR_LOAD_IN_PROGRESS (being loaded here, or its log still being created or
        deleted: `kafkapy.broker.log_state`)."""
        partition = self.partition_for(key)
        states = self.broker.log_states
        if states and states.state(self.topic, partition) is LogState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return self.owned.lookup(partition)

    def coordinator_of_partition(self, partition: int) -> C | None:
        found = self.owned.lookup(partition)
        return None if isinstance(found, ErrorCode) else found

    def coordinators(self) -> list[C]:
        """Every loaded coordinator, by partition."""
        return [c for _, c in sorted(self.owned.loaded().items())]

    # -- partition leadership ----------------------------------------------------------------

    def on_become_leader(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Role listener: load the partition in the background."""
        if topic != self.topic:
            return
        previous = self.owned.lookup(partition)
        if not self.owned.begin_load(partition, leader_epoch):
            return
        if not isinstance(previous, ErrorCode):  # led again in a newer epoch: reload
            self.deactivate(previous)
        self._loads.begin()
        if self._nursery is None:
            self._queued_loads.append((partition, leader_epoch))
        else:
            self._nursery.start_soon(self._load_partition, partition, leader_epoch)

    def on_become_follower(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Role listener: drop the partition's coordinator."""
        if topic != self.topic:
            return
        coordinator = self.owned.drop(partition)
        if coordinator is None:
            return
        self.deactivate(coordinator)
        log.debug("%s-%d moved away (leader epoch %d): unloaded %s", self.topic, partition,
                  leader_epoch, self.describe(coordinator))

    async def _load_partition(self, partition: int, leader_epoch: int) -> None:
        """Load one partition (`_load_one`) and count it into the summary of the loads that
        overlap it (see the module doc)."""
        held: tuple[int, str] | None = None
        try:
            held = await self._load_one(partition, leader_epoch)
        finally:
            summary = self._loads.finish(held, now_ms())
        if summary is not None:
            partitions, count, noun, elapsed = summary
            log.info("loaded %d %s from %d %s partitions in %d ms", count, noun, partitions,
                     self.topic, elapsed)

    async def _load_one(self, partition: int, leader_epoch: int) -> tuple[int, str] | None:
        """Replay the partition's log into a new coordinator and install it, unless the
        leadership changed in between; what it holds, None if it was not installed. The
        coordinator epoch is the partition's leader epoch (Kafka's): what an older coordinator
        of the same keys writes is refused."""
        started = now_ms()
        self.partition_for("")  # the topic's real partition count, from the image
        coordinator = self.new_coordinator(leader_epoch)
        try:
            loaded = await self._replay(self.partition_log(partition), coordinator)
        except Exception:  # storage trouble: stay unloaded so clients keep retrying elsewhere
            log.exception("loading %s-%d failed", self.topic, partition)
            if self.owned.is_current(partition, leader_epoch):
                self.owned.drop(partition)
            return None
        if not self.owned.finish_load(partition, leader_epoch, coordinator):
            return None
        log.debug("loaded %s-%d (leader epoch %d): %d records, %s in %d ms", self.topic, partition,
                  leader_epoch, loaded, self.describe(coordinator), now_ms() - started)
        self.wake()
        await self.activate(coordinator)
        return self.held(coordinator)

    async def _replay(self, plog: PartitionLog | None, into: C) -> int:
        """The bulk of the log in a worker thread, then what was appended meanwhile (markers
        of transactions, written by the trio thread) on the trio thread."""
        if plog is None:
            return 0
        end = plog.log_end_offset
        loaded = await runtime.get().run_sync_in_thread(self.replay_log, plog, into, None, end)
        return loaded + self.replay_log(plog, into, end, None)

    # -- start-up ----------------------------------------------------------------------------

    async def ready(self) -> Self:
        """This runtime once its state is loaded (created and loaded on first use)."""
        await self.ensure_loaded()
        return self

    async def ensure_loaded(self) -> None:
        """Mark the runtime loaded: partitions load as their leadership arrives
        (`on_become_leader`); the topic itself is asked of the controller by `ensure_topic`."""
        if not self.loaded:
            self.loaded = True
            self.loaded_event.set()

    async def ensure_topic(self) -> bool:
        """Does the internal topic exist? The first call asks the controller to create it
        (FindCoordinator answers COORDINATOR_NOT_AVAILABLE until it is there)."""
        if self._asking_controller:  # one request at a time; the client retries meanwhile
            return partition_count(self.broker, self.topic) is not None
        self._asking_controller = True
        try:
            return await ensure_cluster_topic(
                self.broker, self.topic, self.num_partitions, self.topic_configs(),
                self._replication_factor_key,
            )
        finally:
            self._asking_controller = False

    # -- writes ------------------------------------------------------------------------------

    def partition_log(self, partition: int) -> PartitionLog | None:
        """The partition's log here; None if there is none."""
        return (self.broker.partition_log(self.topic, partition)
                or self.broker.logs.get(self.topic, partition))

    def append(
        self, partition: int, records: list[Record], owner: C | None = None, *,
        producer_id: int = -1, producer_epoch: int = -1,
    ) -> Appended:
        """Append `records` as one batch (transactional when `producer_id` >= 0) through the
        normal log path, in the partition's leader epoch.

        Raises `NotOwned` when the partition is not led here, or not by
        `owner` any more, `MissingPartition` when it does not exist, and whatever the log
        raises (StorageError, OSError, ...); nothing was appended then."""
        epoch = self.owned.leader_epoch(partition)
        if epoch is None or (owner is not None and self.owned.lookup(partition) is not owner):
            raise NotOwned(f"{self.topic}-{partition} moved away")
        plog = self.partition_log(partition)
        if plog is None:
            raise MissingPartition(f"{self.topic}-{partition} does not exist")
        now = now_ms()
        data = build_batch(records, base_timestamp=now, producer_id=producer_id,
                           producer_epoch=producer_epoch, is_transactional=producer_id >= 0)
        start = plog.log_end_offset
        plog.append(data, now_ms=now, leader_epoch=epoch)
        self.broker.after_append(self.topic, partition, plog)
        return Appended(start, plog.log_end_offset)

    async def wait_replicated(self, partition: int, end: int) -> ErrorCode:
        """Until the partition's high watermark passed `end` (acks=all for coordinator writes;
        at once when the leader is the whole ISR)."""
        return await wait_replicated(self.broker, self.topic, partition, end)

    def committed_end(self, partition: int, plog: PartitionLog, failed_start: int | None) -> int:
        """Where the log a failed write is reverted to ends: below the failed records and below
        the high watermark (the records stay in the log there, replicated too few times or not
        at all)."""
        hw = plog.high_watermark
        return hw if failed_start is None else min(hw, failed_start)

    # -- timers ------------------------------------------------------------------------------

    def wake(self, deadline: int | None = None) -> None:
        """Make the timer task recompute its deadline: always, or only if `deadline` comes
        before the time it sleeps until."""
        if deadline is None or self._sleep_until is None or deadline < self._sleep_until:
            self._changed.set()

    async def serve(self) -> None:
        """Load the state, then fire the timers at their deadlines and load the partitions
        whose leadership arrives, forever (cancel to stop)."""
        await self.ensure_loaded()
        async with runtime.get().task_group() as nursery:
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
            self._changed = runtime.new_event()
            deadline = self._sleep_until = self.next_deadline()
            delay_ms = None if deadline is None else deadline - now_ms()
            if delay_ms is None:
                await self._changed.wait()
            elif delay_ms > 0:
                with runtime.get().move_on_after(delay_ms / 1000):
                    await self._changed.wait()
            else:
                self._sleep_until = None
                try:
                    await self.fire_timers()
                except Exception:
                    log.exception("%s coordinator timers failed", self.topic)
                    await runtime.get().sleep(self.timer_retry_s)
            # something changed, a deadline passed or timers ran: recompute
            self._sleep_until = None
