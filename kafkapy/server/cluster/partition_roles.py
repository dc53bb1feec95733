"""Cluster mode data plane: each local partition's role (leader / follower) and its bookkeeping.

The broker delegates to it (`broker.replicas`); it uses of the broker only what `ReplicaHost`
names, and of the cluster node only what `ClusterLink` names (the published image, the controller
channel's AlterPartition, the replica fetchers), so it imports neither.

What it does (docs/cluster.md, Kafka's ReplicaManager / Partition in KRaft mode):
- `apply(image, delta)`: topics come from the metadata image (the TopicStore stays in memory,
  no topics file) at once; their partitions are queued (`DeltaSlices`) and applied in slices
  of at most 256 partitions or 20 ms - the first inside the call, the rest by
  `run_metadata_slices` with a checkpoint between slices, their new logs created in a worker
  thread first - so a delta of thousands of partitions never holds Raft, heartbeats or
  requests. Changes to open logs go before log creations; internal topics' partitions are
  applied at once. A queued partition without a log or role here is LOADING
  (`kafkapy.broker.log_state`) until its slice. In a slice, logs are opened for partitions
  with a replica here and deleted for removed topics; a partition led by this node becomes
  leader (a `LeaderState` in the image's leader epoch; the HW keeps its checkpointed value and
  moves on as followers report), any other follower (the replica fetchers take it; truncation
  on a diverging epoch, KIP-279). Role listeners hear about every role or epoch change.
- Leader events: `on_leader_append` (after a produce append), `on_follower_fetch` (a follower's
  fetch offset moves the HW); every HW move sets the log's HW and wakes long polls and acks=all
  waiters (`wait_replicated`).
- ISR changes: `run_isr_maintenance()` (started by the replica fetcher manager's `run`) proposes
  shrinks of lagging followers every half `replica.lag.time.max.ms` and expansions as soon as a
  follower catches up, one change in flight per partition; the changes due at one check go in
  one AlterPartition through the controller channel, logged as one line.
- Logging: one INFO line per changed topic; the role totals and each partition's at DEBUG.

Error handling: a log that cannot be opened or deleted takes that partition alone offline
(`broker.log_states`: produce/fetch answer KAFKA_STORAGE_ERROR, one ERROR line, counted in the
metrics; the log store logged the cause) and leaves it without a role; the rest of the delta and
every other partition are applied as if nothing happened. An AlterPartition the controller refused
is forgotten and tried again at the next check; an expansion whose outcome is unknown (no
answer: it may have committed) stays pending and is resent (`LeaderState` rule 5). Resource
handling: no tasks of its own except the ISR loop and the slice task.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
import uuid
from typing import TYPE_CHECKING, Protocol

import trio
import trio.lowlevel

from kafkapy.broker.log_state import LogState
from kafkapy.broker.metadata_store import INTERNAL_TOPICS, TopicInfo, TopicStore
from kafkapy.broker.partition_role import PartitionRole
from kafkapy.controller.image import MetadataImage
from kafkapy.protocol.errors import ErrorCode
from kafkapy.replication.partition import IsrProposal, LeaderState
from kafkapy.server.cluster.delta_slices import DeltaSlices, RoleChanges
from kafkapy.server.cluster.isr_changes import alter_request
from kafkapy.server.cluster.metadata_log import METADATA_TOPIC
from kafkapy.server.cluster.topic_changes import Roles, first_image, topic_change
from kafkapy.storage.errors import StorageError

if TYPE_CHECKING:
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.broker.idempotence import ProducerStates
    from kafkapy.broker.log_state import PartitionLogStates
    from kafkapy.broker.notify import PartitionWaiters
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.controller.image import MetadataDelta, PartitionImage, TopicImage
    from kafkapy.protocol.messages import AlterPartitionRequest, AlterPartitionResponse
    from kafkapy.protocol.messages.alter_partition import AlterPartitionResponse_PartitionData
    from kafkapy.storage import LogConfig, LogManager, PartitionLog

__all__ = [
    "AlterPartitionChannel",
    "ClusterLink",
    "FollowerFetchers",
    "PartitionRole",
    "ReplicaHost",
    "ReplicaManager",
    "RoleListener",
    "monotonic_ms",
]

log = logging.getLogger(__name__)

Key = tuple[str, int]
NO_LEADER = -1
# AlterPartition answers that leave open whether the change was committed: no answer (raised),
# a controller that lost leadership or timed out after proposing it (NOT_CONTROLLER), or a
# partition state that moved on, maybe by this very change (LeaderState rule 5).
_OUTCOME_UNKNOWN = frozenset({
    ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.NOT_CONTROLLER, ErrorCode.INVALID_UPDATE_VERSION,
    ErrorCode.FENCED_LEADER_EPOCH,
})
ALTER_RETRY_S = 0.5  # pause after a failed AlterPartition, so a refused change is not re-sent per fetch
_WAITER_SEQ = itertools.count()  # tie-break of equal end offsets in a waiter heap


class RoleListener(Protocol):
    """Hears about every role or leader epoch change of a local partition (the coordinators)."""

    def on_become_leader(self, topic: str, partition: int, leader_epoch: int) -> None: ...
    def on_become_follower(self, topic: str, partition: int, leader_epoch: int) -> None: ...


class FollowerFetchers(Protocol):
    """The replica fetchers (kafkapy.server.cluster.replica_fetcher): what a follower fetches."""

    def add_partition(self, topic: str, partition: int, topic_id: uuid.UUID, leader: int, leader_epoch: int) -> None: ...
    def remove_partition(self, topic: str, partition: int) -> None: ...


class AlterPartitionChannel(Protocol):
    """The controller channel (kafkapy.server.cluster.lifecycle): where ISR changes go."""

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse: ...


class ClusterLink(Protocol):
    """What partition roles use of the cluster node (kafkapy.server.cluster.node)."""

    @property
    def image(self) -> MetadataImage: ...
    @property
    def channel(self) -> AlterPartitionChannel: ...
    @property
    def fetchers(self) -> FollowerFetchers | None: ...


class ReplicaHost(Protocol):
    """What partition roles use of the broker they run in (kafkapy.server.broker)."""

    @property
    def node_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def log_states(self) -> PartitionLogStates: ...
    @property
    def topics(self) -> TopicStore: ...
    @property
    def waiters(self) -> PartitionWaiters: ...
    @property
    def producer_states(self) -> ProducerStates: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def default_log_config(self) -> LogConfig: ...
    @property
    def role_listeners(self) -> list[RoleListener]: ...
    @property
    def cluster(self) -> ClusterLink: ...
    def log_config(self, info: TopicInfo) -> LogConfig: ...
    def topic_config_value(self, info: TopicInfo, key: str) -> str: ...


def monotonic_ms() -> int:
    """The clock LeaderState runs on (lag times are intervals, so monotonic)."""
    return int(trio.current_time() * 1000)


class ReplicaManager:
    def __init__(self, broker: ReplicaHost) -> None:
        self.broker = broker
        self.roles: dict[Key, PartitionRole] = {}
        self._isr_wakeup = trio.Event()
        self._isr_to_check: set[Key] = set()  # partitions a follower fetch made worth a look
        self._applied_once = False
        self._applied = trio.Event()
        self._changes = RoleChanges()  # the role changes applied since the queue was last empty
        self._slices = DeltaSlices()
        self._image = MetadataImage()  # the latest published image: what queued partitions follow
        #: each follower's latest fetch request (monotonic ms): an idle partition in its fetch
        #: session counts as fetched then (`LeaderState.on_leader_append`)
        self.follower_request_ms: dict[int, int] = {}

    # -- reading ----------------------------------------------------------------------------------
    def role(self, topic: str, partition: int) -> PartitionRole | None:
        return self.roles.get((topic, partition))

    def leader_role(self, topic: str, partition: int) -> PartitionRole | None:
        role = self.roles.get((topic, partition))
        return role if role is not None and role.is_leader else None

    # -- metadata ---------------------------------------------------------------------------------
    async def next_apply(self) -> None:
        """Return after the next `apply` (an auto-create waiting for its topic)."""
        await self._applied.wait()

    def apply(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        """React to a newly published image (see the module doc): the topics at once, their
        partitions' logs and roles in slices (`DeltaSlices`), the first slice here. Each changed
        topic is one INFO line (`topic_changes.topic_change`); the role totals, once the last
        slice is applied, and each partition's role are DEBUG lines."""
        self._image = image
        try:
            self._apply(image, delta)
            self._apply_internal()
            self.run_slice()
        finally:
            self._applied.set()
            self._applied = trio.Event()

    def _apply(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        broker = self.broker
        if not self._applied_once or delta is None:
            first = True
            changed = set(image.topics)
            deleted = [t for t in broker.topics.all() if t.name not in image.topics]
            self._applied_once = True
        else:
            first = False
            changed = set(delta.changed_topics)
            deleted = [
                info for t in delta.deleted_topics.values()
                if (info := broker.topics.get(t.name)) is not None and info.topic_id == t.topic_id
            ]
        for info in deleted:
            # absent from a first image: forget it, but only a RemoveTopicRecord deletes data
            self._remove_topic(info, delete_logs=not first)
        if first:
            self._delete_strays(image)
            self._slices.whole_image = True
        for name in sorted(changed):
            t = image.topics.get(name)
            if t is not None:
                parts = None if first or delta is None else delta.changed_partitions.get(name)
                self._apply_topic(t, first, parts)

    def _delete_strays(self, image: MetadataImage) -> None:
        """Delete the logs on disk of topics the image does not have (or has under another
        topic id): a deletion that crashed before its files were gone, or that happened while
        this node was down (Kafka's stray logs). Only on a whole image, which the publisher
        hands over once this broker has caught up, so it holds every topic that exists."""
        logs = self.broker.logs
        # a log that failed to open at start is a stray too when its topic is gone
        found = {**dict.fromkeys(logs.failed_logs()), **logs.logs()}
        for (topic, partition), plog in found.items():
            if topic == METADATA_TOPIC:
                continue
            t = image.topics.get(topic)
            if (
                t is not None
                and partition in t.partitions
                and (plog is None or not plog.topic_id.int or plog.topic_id == t.topic_id)
            ):
                continue
            log.warning("%s-%d belongs to no topic in the metadata: deleting it", topic, partition)
            self._delete_log(topic, partition)

    def _delete_log(self, topic: str, partition: int) -> bool:
        """Delete the partition's log (a failed one's too): True when it is gone, else the
        partition goes offline alone (a later delta or restart retries the delete)."""
        try:
            self.broker.logs.delete_log(topic, partition)
        except StorageError as e:
            self.broker.log_states.set_offline(topic, partition, str(e), undeleted=True)
            return False
        self.broker.log_states.set_ready(topic, partition)
        return True

    def _remove_topic(self, info: TopicInfo, *, delete_logs: bool) -> None:
        """Forget the topic at once (roles, producer state); its logs are deleted in slices,
        each partition LOADING until then."""
        broker = self.broker
        broker.topics.remove(info.name)
        broker.producer_states.forget_topic(info.name)
        for p in range(info.partitions):
            key = (info.name, p)
            self._drop_role(key)
            self._slices.pending.pop(key, None)
            self._slices.changes.pop(key, None)
            if delete_logs:
                self._slices.deletes[key] = info.topic_id
                broker.log_states.set_loading(*key)
            broker.waiters.notify(key)
        log.info("removed topic %s", info.name)

    def _roles_of(self, t: TopicImage) -> Roles:
        return {p: role.is_leader for p in t.partitions if (role := self.roles.get((t.name, p)))}

    def _apply_topic(self, t: TopicImage, first: bool, parts: set[int] | None) -> None:
        """Follow one topic's image: its TopicInfo at once, and its partitions (`parts`, None:
        all) queued for the slices; a partition with no role or no log here yet is LOADING
        until its slice. Its change is one line (DEBUG in a whole image, which is summed up
        in one), with the roles the image gives this broker."""
        broker, node_id = self.broker, self.broker.node_id
        before = self._roles_of(t)
        count = max(t.partitions) + 1 if t.partitions else 0
        old = broker.topics.get(t.name)
        if old is not None and old.topic_id != t.topic_id:
            self._remove_topic(old, delete_logs=True)  # deleted and re-created meanwhile
            old = None
        info = TopicInfo(t.name, t.topic_id, count, dict(t.configs), t.name in INTERNAL_TOPICS)
        broker.topics.put(info)
        configs_changed = old is None or old.configs != info.configs  # first sight: the disk may be stale
        if configs_changed:
            parts = None
        work, states = self._slices, broker.log_states
        after: Roles = {}
        for p in sorted(t.partitions if parts is None else parts):
            part = t.partitions.get(p)
            if part is None:
                continue
            key = (t.name, p)
            work.deletes.pop(key, None)  # `_open_log` removes an older topic's log itself
            plog = broker.logs.get(t.name, p)
            has_log = plog is not None and plog.topic_id == t.topic_id
            # an open log's change, or a leadership taken over, does not wait behind log creations
            urgent = has_log or (part.leader == node_id and key in work.pending)
            queue = work.changes if urgent else work.pending
            was = work.pending.pop(key, False) if urgent else False
            queue[key] = was or queue.get(key, False) or configs_changed
            if info.internal:
                work.internal.append(key)
            if node_id in part.replicas:
                after[p] = part.leader == node_id
                if key not in self.roles or not has_log:
                    states.set_loading(t.name, p)
        if parts is not None:
            after = {**{p: r for p, r in before.items() if p not in parts}, **after}
        change = topic_change(old, info, t, before, after)
        if change is not None:
            log.log(logging.DEBUG if first else logging.INFO, "%s", change)

    # -- slices -----------------------------------------------------------------------------------
    def _apply_internal(self) -> None:
        """Apply the queued `__consumer_offsets` / `__transaction_state` partitions now, whatever
        the slice bounds (at most a few dozen, created once per cluster): FindCoordinator
        waits for a coordinator this node is loading, and it can only see a load that began,
        so a coordinator partition must not wait in the queue (clients such as librdkafka's
        admin do not retry COORDINATOR_LOAD_IN_PROGRESS everywhere)."""
        work = self._slices
        while work.internal:
            key = work.internal.pop()
            for queue in (work.changes, work.pending):
                if key in queue:
                    self._apply_queued(key, queue.pop(key))

    def run_slice(self) -> bool:
        """Apply up to one slice of the queued partition work (deletions first); True when
        some is left (`run_metadata_slices` goes on with it after a checkpoint)."""
        work = self._slices
        deadline = time.perf_counter() + work.budget_s
        done = 0
        while work and done < work.partitions:
            if done and time.perf_counter() > deadline:
                break
            if work.deletes:
                key, topic_id = next(iter(work.deletes.items()))
                del work.deletes[key]
                self._delete_removed(key, topic_id)
            else:
                queue = work.changes or work.pending
                key, configs_changed = next(iter(queue.items()))
                del queue[key]
                self._apply_queued(key, configs_changed)
            done += 1
        work.slices += done > 0
        if work:
            work.wakeup.set()
            return True
        if done or work.whole_image:
            self._drained()
        return False

    async def run_metadata_slices(self) -> None:
        """Apply what `apply` queued beyond its first slice, one slice per checkpoint, so
        heartbeats, Raft and requests are served between slices (started by the replica
        fetcher manager's `run`, beside the ISR loop). The new logs a slice needs are created
        in a worker thread first (`_create_logs`): a log is a directory and a few files, 1-15
        ms each on a busy disk, which would bound a slice to a handful of partitions."""
        work = self._slices
        while True:
            await work.wakeup.wait()
            work.wakeup = trio.Event()
            for _ in range(2**62):
                batch = self._creations()
                if batch:
                    await trio.to_thread.run_sync(self._create_logs, batch, abandon_on_cancel=True)
                    for key, _, topic_id in batch:
                        if key not in work.pending and key not in work.changes and key not in work.deletes:
                            work.deletes[key] = topic_id  # removed while its log was created
                if not self.run_slice():
                    break
                await trio.lowlevel.checkpoint()

    def _creations(self) -> list[tuple[Key, LogConfig, uuid.UUID]]:
        """The partitions of the next slice that need a new log here (per the latest image)."""
        broker, work = self.broker, self._slices
        if work.deletes or work.changes:
            return []  # the next slice applies those first
        out = []
        for key in itertools.islice(work.pending, work.partitions):
            t = self._image.topics.get(key[0])
            part = t.partitions.get(key[1]) if t is not None else None
            info = broker.topics.get(key[0])
            if (
                t is None or part is None or info is None or info.topic_id != t.topic_id
                or broker.node_id not in part.replicas or broker.logs.get(*key) is not None
                or broker.log_states.state(*key) is LogState.OFFLINE
            ):
                continue
            out.append((key, broker.log_config(info), t.topic_id))
        return out

    def _create_logs(self, batch: list[tuple[Key, LogConfig, uuid.UUID]]) -> None:
        """Worker thread: create the logs (the log manager is thread-safe). A failure is left
        to the slice, which tries again on the event loop and takes the partition offline."""
        for (topic, p), config, topic_id in batch:
            try:
                self.broker.logs.get_or_create(topic, p, config, topic_id)
            except Exception as e:
                log.debug("%s-%d: creating its log failed (the slice retries): %s", topic, p, e)

    def _drained(self) -> None:
        """The queue is empty: the summary lines of what it applied."""
        image = self._image
        if self._changes:
            log.debug("metadata offset %d: %s", image.offset, self._changes.summary())
            self._changes = RoleChanges()
        if self._slices.whole_image:
            self._slices.whole_image = False
            leads = sum(r.is_leader for r in self.roles.values())
            log.info("%s", first_image(image.offset, len(image.topics),
                                       sum(len(t.partitions) for t in image.topics.values()),
                                       leads, len(self.roles) - leads))

    def _apply_queued(self, key: Key, configs_changed: bool) -> None:
        """Bring one queued partition to the latest image (which may have moved on since it
        was queued); it is not LOADING afterwards (ready, offline, or no replica here)."""
        broker, (topic, p) = self.broker, key
        t = self._image.topics.get(topic)
        part = t.partitions.get(p) if t is not None else None
        info = broker.topics.get(topic)
        try:
            if t is not None and part is not None and info is not None and info.topic_id == t.topic_id:
                self._apply_partition(self._image, info, p, part, configs_changed)
        except StorageError as e:  # the log store logged the cause: no second traceback
            broker.log_states.set_offline(topic, p, str(e))
            self._drop_role(key)
        except Exception:  # one bad partition must not stop the others from following
            log.exception("%s-%d: applying its metadata failed", topic, p)
            self._drop_role(key)
        if broker.log_states.state(topic, p) is LogState.LOADING:
            broker.log_states.set_ready(topic, p)

    def _delete_removed(self, key: Key, topic_id: uuid.UUID) -> None:
        """Delete the log of a removed topic's partition, unless a topic created since under
        the same name owns the log now."""
        logs, (topic, p) = self.broker.logs, key
        plog = logs.get(topic, p)
        if plog is not None and plog.topic_id.int and plog.topic_id != topic_id:
            if self.broker.log_states.state(topic, p) is LogState.LOADING:
                self.broker.log_states.set_ready(topic, p)
            return
        if plog is not None or key in logs.failed_logs() or self.broker.log_states.undeleted(topic, p):
            self._delete_log(topic, p)
        else:
            self.broker.log_states.set_ready(topic, p)

    def _open_log(self, info: TopicInfo, p: int) -> PartitionLog | None:
        """The partition's log, created if new; None when it failed (the partition is then
        offline, `_delete_log`)."""
        logs, states = self.broker.logs, self.broker.log_states
        plog = logs.get(info.name, p)
        if plog is not None and plog.topic_id == info.topic_id:
            return plog  # the common case: configs follow through `configs_changed`
        if (plog is not None and plog.topic_id.int) or states.undeleted(info.name, p):
            log.warning("%s-%d on disk belongs to an older topic: removing it", info.name, p)
            if not self._delete_log(info.name, p):
                return None
        try:
            plog = logs.get_or_create(info.name, p, self.broker.log_config(info), info.topic_id)
        except StorageError as e:
            states.set_offline(info.name, p, str(e))
            return None
        states.set_ready(info.name, p)
        return plog

    def _apply_partition(
        self, image: MetadataImage, info: TopicInfo, p: int, part: PartitionImage, configs_changed: bool
    ) -> None:
        broker = self.broker
        node_id = broker.node_id
        key = (info.name, p)
        role = self.roles.get(key)
        if node_id not in part.replicas:
            if role is not None:
                self._drop_role(key)
            if broker.logs.get(info.name, p) is not None or key in broker.logs.failed_logs():
                log.info("%s-%d moved away from this broker: deleting its log", info.name, p)
                self._delete_log(info.name, p)
            return
        plog = self._open_log(info, p)
        if plog is None:
            self._drop_role(key)
            return
        if configs_changed:
            plog.set_config(broker.log_config(info), broker.default_log_config)
        now = monotonic_ms()
        if part.leader == node_id:
            if role is not None and role.is_leader and role.leader_epoch == part.leader_epoch:
                assert role.leader_state is not None
                hw = role.leader_state.on_metadata(part.replicas, part.isr, part.partition_epoch,
                                                   plog.log_end_offset, now)
                self._update(role, part)
                if hw is not None:
                    self._hw_moved(role, plog, hw)
                return
            self._become_leader(info, p, part, plog, now)
            return
        if (
            role is not None and not role.is_leader
            and role.leader_epoch == part.leader_epoch and role.leader == part.leader
        ):
            self._update(role, part)
            return
        self._become_follower(info, p, part)

    def _update(self, role: PartitionRole, part: PartitionImage) -> None:
        role.replicas = tuple(part.replicas)
        role.isr = tuple(part.isr)
        role.partition_epoch = part.partition_epoch
        if role.leader_state is not None:
            role.isr = role.leader_state.isr
            role.partition_epoch = role.leader_state.partition_epoch
        self._signal(role)

    def _become_leader(self, info: TopicInfo, p: int, part: PartitionImage, plog: PartitionLog, now: int) -> None:
        key = (info.name, p)
        self._stop_fetching(key)
        old = self.roles.get(key)
        state = LeaderState(
            part.replicas, part.isr, part.leader_epoch, part.partition_epoch, self.broker.node_id,
            high_watermark=plog.high_watermark, epoch_start_offset=plog.log_end_offset, now_ms=now,
        )
        role = PartitionRole(info.name, p, info.topic_id, part.leader, part.leader_epoch,
                             part.partition_epoch, tuple(part.replicas), tuple(part.isr), state)
        self.roles[key] = role
        if old is not None:
            self._signal(old)
        hw = state.on_leader_append(plog.log_end_offset)
        if hw is not None:
            self._hw_moved(role, plog, hw)
        self._changes.leaders += 1
        log.debug("%s-%d: leader in epoch %d (ISR %s, LEO %d, HW %d)", info.name, p, part.leader_epoch,
                  list(part.isr), plog.log_end_offset, plog.high_watermark)
        self.broker.waiters.notify(key)
        self._isr_to_check.add(key)
        self._isr_wakeup.set()
        for listener in list(self.broker.role_listeners):
            try:
                listener.on_become_leader(info.name, p, part.leader_epoch)
            except Exception:
                log.exception("role listener failed on %s-%d", info.name, p)

    def _become_follower(self, info: TopicInfo, p: int, part: PartitionImage) -> None:
        """The partition's producer state stays: the replica fetcher replays the leader's
        batches into it and a truncation makes it reload (`ProducerStates`), so it is right
        when this replica leads again."""
        key = (info.name, p)
        old = self.roles.get(key)
        role = PartitionRole(info.name, p, info.topic_id, part.leader, part.leader_epoch,
                             part.partition_epoch, tuple(part.replicas), tuple(part.isr))
        self.roles[key] = role
        if old is not None:
            self._signal(old)
        fetchers = self._fetchers()
        if fetchers is not None:
            if part.leader >= 0:
                fetchers.add_partition(info.name, p, info.topic_id, part.leader, part.leader_epoch)
            else:
                fetchers.remove_partition(info.name, p)
        self._changes.followers[part.leader] = self._changes.followers.get(part.leader, 0) + 1
        log.debug("%s-%d: follower of %d in epoch %d", info.name, p, part.leader, part.leader_epoch)
        self.broker.waiters.notify(key)
        for listener in list(self.broker.role_listeners):
            try:
                listener.on_become_follower(info.name, p, part.leader_epoch)
            except Exception:
                log.exception("role listener failed on %s-%d", info.name, p)

    def _drop_role(self, key: Key) -> None:
        role = self.roles.pop(key, None)
        self._stop_fetching(key)
        self.broker.producer_states.forget(key)
        if role is not None:
            self._signal(role)

    def _fetchers(self) -> FollowerFetchers | None:
        return self.broker.cluster.fetchers

    def _stop_fetching(self, key: Key) -> None:
        fetchers = self._fetchers()
        if fetchers is not None:
            fetchers.remove_partition(*key)

    # -- leader events ----------------------------------------------------------------------------
    def _signal(self, role: PartitionRole) -> None:
        """The role changed (leadership, epoch, ISR): every waiter looks again."""
        role.changed.set()
        role.changed = trio.Event()
        waiters, role.hw_waiters = role.hw_waiters, []
        for _, _, event in waiters:
            event.set()

    def _hw_moved(self, role: PartitionRole, plog: PartitionLog, hw: int) -> None:
        """Why a heap of waiters: with many acks=all produces in flight on a partition, each
        HW step completes a few of them; waking all of them on every step (to find out and
        sleep again) cost a share of the leader's CPU growing with the requests in flight."""
        plog.high_watermark = hw
        self.broker.producer_states.on_append((role.topic, role.partition), plog)
        self.broker.waiters.notify((role.topic, role.partition))
        role.changed.set()
        role.changed = trio.Event()
        waiters = role.hw_waiters
        while waiters and waiters[0][0] <= hw:
            heapq.heappop(waiters)[2].set()

    def on_leader_append(self, topic: str, partition: int, plog: PartitionLog) -> None:
        role = self.leader_role(topic, partition)
        if role is None or role.leader_state is None:
            return
        hw = role.leader_state.on_leader_append(plog.log_end_offset, self.follower_request_ms)
        if hw is not None:
            self._hw_moved(role, plog, hw)

    def on_replicated(self, topic: str, partition: int) -> None:
        """A follower replica's high watermark or log start moved: wake the consumers' long
        polls on this replica (KIP-392), which read up to it, before their max_wait_ms."""
        self.broker.waiters.notify((topic, partition))

    def on_follower_request(self, replica_id: int) -> None:
        """A follower's Fetch arrived (once per request, before its partitions)."""
        self.follower_request_ms[replica_id] = monotonic_ms()

    def on_follower_fetch(
        self, role: PartitionRole, replica_id: int, fetch_offset: int, plog: PartitionLog, log_start_offset: int = -1
    ) -> None:
        """A follower fetched (handlers call this once per partition per Fetch request)."""
        state = role.leader_state
        if state is None:
            return
        if log_start_offset >= 0 and role.follower_log_starts.get(replica_id) != log_start_offset:
            role.follower_log_starts[replica_id] = log_start_offset  # rare: after a DeleteRecords
            role.changed.set()
            role.changed = trio.Event()
        leo = plog.log_end_offset
        was_in_isr = replica_id in state.isr
        hw = state.on_follower_fetch(replica_id, fetch_offset, leo, monotonic_ms())
        if hw is not None:
            self._hw_moved(role, plog, hw)
        if (
            not was_in_isr and state.pending is None and replica_id in state.progress
            and fetch_offset >= state.high_watermark and fetch_offset >= state.epoch_start_offset
        ):
            self._isr_to_check.add((role.topic, role.partition))  # may be ready to join the ISR
            self._isr_wakeup.set()

    def min_insync_replicas(self, topic: str) -> int:
        info = self.broker.topics.get(topic)
        try:
            return int(self.broker.topic_config_value(info, "min.insync.replicas")) if info else 1
        except ValueError:
            return 1

    async def wait_replicated(self, topic: str, partition: int, end_offset: int, timeout_ms: int) -> ErrorCode:
        """acks=all: NONE once the HW reached `end_offset` with enough ISR members (see
        docs/cluster.md for the other answers)."""
        key = (topic, partition)
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000
        min_isr = self.min_insync_replicas(topic)
        for _ in range(1_000_000):
            role = self.roles.get(key)
            plog = self.broker.logs.get(topic, partition)
            if role is None or role.leader_state is None or plog is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if plog.high_watermark >= end_offset:
                if not role.leader_state.enough_replicas(min_isr):
                    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return ErrorCode.NONE
            if trio.current_time() >= deadline:
                return ErrorCode.REQUEST_TIMED_OUT
            entry = (end_offset, next(_WAITER_SEQ), trio.Event())
            heapq.heappush(role.hw_waiters, entry)
            try:
                with trio.move_on_at(deadline):
                    await entry[2].wait()
            finally:
                if not entry[2].is_set() and entry in role.hw_waiters:  # timed out or cancelled
                    role.hw_waiters.remove(entry)
                    heapq.heapify(role.hw_waiters)
        return ErrorCode.REQUEST_TIMED_OUT

    # -- ISR changes ------------------------------------------------------------------------------
    async def run_isr_maintenance(self) -> None:
        """Propose ISR changes: for every led partition each half lag time (shrinks), and at
        once for a partition whose follower may join (expansions)."""
        lag_ms = self.broker.config.get_int("replica.lag.time.max.ms")
        period = max(lag_ms, 2) / 2000
        next_full = trio.current_time() + period
        async with trio.open_nursery() as nursery:
            while True:
                with trio.move_on_at(next_full):
                    await self._isr_wakeup.wait()
                self._isr_wakeup = trio.Event()
                keys: set[Key] | None = self._isr_to_check
                self._isr_to_check = set()
                if trio.current_time() >= next_full:
                    keys = None
                    next_full = trio.current_time() + period
                self.check_isr(nursery, lag_ms, keys)

    def check_isr(self, nursery: trio.Nursery, lag_ms: int, keys: set[Key] | None = None) -> None:
        """Propose the ISR changes due for `keys` (None: every led partition), all of them in
        one AlterPartition (as Kafka's AlterPartitionManager batches what is pending): a
        follower that died or came back changes thousands of ISRs at once."""
        image = self.broker.cluster.image
        now, now_s = monotonic_ms(), trio.current_time()
        roles = list(self.roles.values()) if keys is None else [r for k in keys if (r := self.roles.get(k))]
        batch: list[tuple[PartitionRole, IsrProposal]] = []
        for role in roles:
            state = role.leader_state
            if state is None or len(role.replicas) == 1 or role.alter_in_flight or role.alter_retry_at > now_s:
                continue  # a lone replica is its whole ISR: nothing to shrink or expand
            plog = self.broker.logs.get(role.topic, role.partition)
            if plog is None:
                continue
            ineligible = [r for r in role.replicas if not image.is_active(r)]
            proposal = state.propose_isr_change(plog.log_end_offset, now, lag_ms, ineligible=ineligible)
            if proposal is not None:
                role.alter_in_flight = True
                batch.append((role, proposal))
        if batch:
            nursery.start_soon(self._alter_partitions, batch)

    async def _alter_partitions(self, batch: list[tuple[PartitionRole, IsrProposal]]) -> None:
        """Send one AlterPartition for `batch` and apply the controller's answer to each
        partition (one in flight per partition); one log line for the whole batch."""
        results: dict[tuple[uuid.UUID, int], AlterPartitionResponse_PartitionData] = {}
        try:
            response = await self.broker.cluster.channel.alter_partition(
                alter_request(batch, self.broker.cluster.image.brokers, self.broker.node_id))
            top = ErrorCode(response.error_code)
            results = {(t.topic_id, p.partition_index): p for t in response.topics for p in t.partitions}
        except Exception as exc:
            log.warning("AlterPartition of %d partitions failed (it may still commit): %s", len(batch), exc)
            top = ErrorCode.UNKNOWN_SERVER_ERROR
        finally:
            for role, _ in batch:
                role.alter_in_flight = False
        outcomes: dict[str, int] = {}
        resend: list[Key] = []
        for role, proposal in batch:
            result = results.get((role.topic_id, role.partition))
            code = top
            if code is ErrorCode.NONE:
                code = ErrorCode(result.error_code) if result is not None else ErrorCode.UNKNOWN_SERVER_ERROR
            self._alter_outcome(role, proposal, code, result)
            outcomes[code.name] = outcomes.get(code.name, 0) + 1
            if role.leader_state is not None and role.leader_state.resend_pending:
                resend.append((role.topic, role.partition))
        log.info("AlterPartition of %d partitions: %s", len(batch),
                 ", ".join(f"{n} {name}" for name, n in sorted(outcomes.items())))
        if resend:  # outcome unknown: resend after the pause, not a lag period later
            await trio.sleep(ALTER_RETRY_S)
            self._isr_to_check.update(resend)
            self._isr_wakeup.set()

    def _alter_outcome(
        self, role: PartitionRole, proposal: IsrProposal, code: ErrorCode,
        result: AlterPartitionResponse_PartitionData | None,
    ) -> None:
        """Apply the controller's answer for one partition's ISR change."""
        state = role.leader_state
        assert state is not None
        plog = self.broker.logs.get(role.topic, role.partition)
        leo = plog.log_end_offset if plog is not None else 0
        if code is ErrorCode.NONE and result is not None:
            hw = state.isr_change_committed(proposal, result.isr, result.partition_epoch, leo)
            if proposal.change.removed:
                self.broker.stats.isr_shrinks += 1
            if proposal.change.added:
                self.broker.stats.isr_expands += 1
            if self.roles.get((role.topic, role.partition)) is role:
                role.isr = state.isr
                role.partition_epoch = state.partition_epoch
            log.debug("%s-%d: ISR now %s (partition epoch %d)", role.topic, role.partition,
                      list(state.isr), state.partition_epoch)
        else:
            hw = state.isr_change_failed(proposal, leo, maybe_applied=code in _OUTCOME_UNKNOWN)
            role.alter_retry_at = trio.current_time() + ALTER_RETRY_S
            log.debug("%s-%d: AlterPartition %s: %s", role.topic, role.partition, list(proposal.new_isr), code.name)
        if plog is not None and hw is not None and self.roles.get((role.topic, role.partition)) is role:
            self._hw_moved(role, plog, hw)
        else:
            self._signal(role)
