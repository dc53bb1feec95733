"""Replica fetchers: followers pull their partitions from the leaders (Kafka's ReplicaFetcherThread).

Why one task per source broker: a follower of many partitions led by the same broker sends one
Fetch for all of them (as Kafka does), so the cost is per batch of partitions, not per partition;
a slow or dead leader only stalls its own partitions.

Protocol (Fetch v15, KIP-903 `ReplicaState` carrying our id and broker epoch; topic ids): for each
partition the fetch offset is the local log end offset and `last_fetched_epoch` the latest epoch
in the local leader-epoch cache, with `current_leader_epoch` the epoch the image gave us. The
leader answers with data read up to its log end, its high watermark and, when our log diverged
from its own (KIP-279), `diverging_epoch` = (epoch, end offset): we truncate to the smaller of
that end offset and our own end of that epoch and fetch again.

Fetch sessions (KIP-227, `replication.follower_session`): one session per source broker, so an
idle follower's requests carry only the partitions whose fetch offset moved and the leader's
answers only partitions with news, instead of every partition every `replica.fetch.wait.max.ms`.
A new partition, a leader epoch change or a truncation makes the next request full (what the
leader checks only on a full request: the epoch fence and the diverging epoch). The leader
answering FETCH_SESSION_ID_NOT_FOUND (its cache evicted the session, or it restarted) or
INVALID_FETCH_SESSION_EPOCH is answered at once with a full request that opens a new session;
any other failed request also starts over with a full one.

Per partition answers:
- NONE: append the batches as they are (`append_as_follower`, offsets and epochs kept), replay
  their producer batches into the partition's producer state (`ProducerStates.on_replicated`;
  a new leader must know every producer's sequences), then take the leader's high watermark
  (capped at our log end; the LSO follows) and log start offset.
- OFFSET_OUT_OF_RANGE: below the leader's log start -> restart our log empty at it; above its end
  -> truncate to its high watermark (everything there is committed on the leader).
- OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405, a tiered topic whose leader keeps our fetch offset
  in the remote tier only): Kafka's ReplicaFetcherTierStateMachine - ask the leader its local
  log start (ListOffsets EARLIEST_LOCAL), find the remote segment holding the offset before it
  in this broker's remote metadata, restart our log empty after that segment with its copied
  leader epochs and producer snapshot, and replicate from there. Until this broker's metadata
  knows that segment, the partition backs off and tries again.
- NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_*: metadata is moving; the
  partition backs off (`replica.fetch.backoff.ms`) until the image says something new.
A failed request (connection, timeout) backs the whole source off.

Resource handling: `run()` owns the fetcher tasks and the ISR maintenance loop of the
ReplicaManager; cancelling it stops them. `add_partition` / `remove_partition` (called on role
changes) take effect at the next request; a response for a partition whose leader or epoch
changed meanwhile is dropped.

Start-up: every broker builds the manager, but only a follower fetches; the Fetch and
ListOffsets message classes, the fetch session and the response walker load with the first
request to a leader (a single node never sends one).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.storage.errors import StorageError
from kafkapy.storage.remote.layout import TopicIdPartition

if TYPE_CHECKING:
    from kafkapy.broker.config import ClusterConfig
    from kafkapy.broker.idempotence import ProducerStates
    from kafkapy.broker.remote_fetch import RemoteTier
    from kafkapy.controller.image import MetadataImage
    from kafkapy.protocol.fetch_response import FetchedPartition
    from kafkapy.protocol.messages import FetchRequest
    from kafkapy.protocol.messages.fetch import FetchRequest_FetchTopic, FetchRequest_ForgottenTopic
    from kafkapy.replication.follower_session import (
        FollowerSession,
        SessionRequest,
        WantedPartition,
    )
    from kafkapy.server.cluster.partition_roles import ReplicaManager
    from kafkapy.server.cluster.peer import PeerPool
    from kafkapy.storage import LogManager, PartitionLog

__all__ = ["FETCH_VERSION", "FetchState", "ReplicaFetcherManager", "whole_batches"]

log = logging.getLogger(__name__)

FETCH_VERSION = 15
LIST_OFFSETS_VERSION = 9  # EARLIEST_LOCAL (-4) needs v8+
EARLIEST_LOCAL = -4
Key = tuple[str, int]
#: answers that mean "this session is gone": start a new one at once, no back-off
_SESSION_LOST = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH})


@dataclass(slots=True)
class FetchState:
    topic: str
    partition: int
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    delayed_until: float = 0.0  # trio time; back-off after an error


class ReplicaFetcherManager:
    """See the module doc."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        logs: LogManager,
        replicas: ReplicaManager,
        producer_states: ProducerStates,
        peers: PeerPool,
        image: Callable[[], MetadataImage],
        remote_tier: Callable[[], RemoteTier | None] = lambda: None,
    ) -> None:
        """`replicas`: the partition roles (their ISR loop runs here); `peers`: the other
        brokers' inter-broker listeners; `image()`: the published metadata image;
        `remote_tier()`: the broker's remote tier (None: no tiered storage here)."""
        self.node_id = config.node_id
        self.logs = logs
        self.replicas = replicas
        self.producer_states = producer_states
        self.peers = peers
        self._image = image
        self._remote_tier = remote_tier
        self.partitions: dict[Key, FetchState] = {}
        #: the same states by source broker: a fetcher's loop reads its own partitions only
        self._by_leader: dict[int, dict[Key, FetchState]] = {}
        self._running: set[int] = set()
        #: per source broker, the follower's side of its fetch session
        self.sessions: dict[int, FollowerSession] = {}
        self._changed = trio.Event()
        cfg = config
        self.max_wait_ms = cfg.replica_fetch_wait_max_ms
        self.min_bytes = cfg.replica_fetch_min_bytes
        self.max_bytes = cfg.replica_fetch_max_bytes
        self.response_max_bytes = cfg.replica_fetch_response_max_bytes
        self.backoff_s = cfg.replica_fetch_backoff_ms / 1000
        self.request_timeout_s = cfg.request_timeout_ms / 1000
        self.fetches = 0  # requests answered (introspection for tests and logs)
        self._nursery: trio.Nursery | None = None  # run()'s, for producer state loads

    # -- role changes -----------------------------------------------------------------------------
    def add_partition(self, topic: str, partition: int, topic_id: uuid.UUID, leader: int, leader_epoch: int) -> None:
        key = (topic, partition)
        self._forget(key)
        state = self.partitions[key] = FetchState(topic, partition, topic_id, leader, leader_epoch)
        self._by_leader.setdefault(leader, {})[key] = state
        self._wake()

    def remove_partition(self, topic: str, partition: int) -> None:
        if self._forget((topic, partition)):
            self._wake()

    def _forget(self, key: Key) -> bool:
        state = self.partitions.pop(key, None)
        if state is None:
            return False
        mine = self._by_leader.get(state.leader)
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self._by_leader[state.leader]
        return True

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- running ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Run the fetcher tasks (one per source broker) and the ISR maintenance loop."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.replicas.run_isr_maintenance)
            nursery.start_soon(self.replicas.run_metadata_slices)
            while True:
                for leader in set(self._by_leader) - self._running:
                    self._running.add(leader)
                    nursery.start_soon(self._fetcher, leader, name=f"replica-fetcher-{leader}")
                changed = self._changed
                await changed.wait()

    async def _fetcher(self, leader: int) -> None:
        try:
            for _ in range(2**62):
                mine = list(self._by_leader.get(leader, {}).values())
                if not mine:
                    return
                now = trio.current_time()
                ready = [s for s in mine if s.delayed_until <= now]
                if not ready:
                    changed = self._changed
                    with trio.move_on_at(min(s.delayed_until for s in mine)):
                        await changed.wait()
                    continue
                await self.fetch_once(leader, ready)
        finally:
            self._running.discard(leader)
            self.sessions.pop(leader, None)
            self._wake()  # a partition may have come back for this leader meanwhile

    async def fetch_once(self, leader: int, states: list[FetchState]) -> None:
        """One Fetch to `leader` for `states` (in its fetch session) and the processing of its
        answer."""
        from kafkapy.protocol.fetch_response import fetch_response_session_id, parse_fetch_response
        from kafkapy.replication.follower_session import FollowerSession

        session = self.sessions.setdefault(leader, FollowerSession())
        request, sent, plan = self._request(states, session)
        if not sent:
            await trio.sleep(self.backoff_s)
            return
        try:
            body = await self.peers.request(
                leader, ApiKey.FETCH, FETCH_VERSION, request,
                timeout_s=self.max_wait_ms / 1000 + self.request_timeout_s, raw=True,
            )
            error_code, topics = parse_fetch_response(FETCH_VERSION, body)
            session_id = fetch_response_session_id(body)
        except Exception as exc:  # PeerError, unknown address, undecodable, ...: back off, retry
            log.debug("fetch from broker %d failed: %s", leader, exc)
            session.reset()  # the leader may or may not have taken the epoch
            await trio.sleep(self.backoff_s)
            return
        self.fetches += 1
        if error_code:
            session.reset()
            if ErrorCode(error_code) in _SESSION_LOST:
                log.debug("fetch from broker %d: %s: starting a new session", leader, ErrorCode(error_code).name)
                return
            log.info("fetch from broker %d: %s", leader, ErrorCode(error_code).name)
            await trio.sleep(self.backoff_s)
            return
        session.answered(plan, session_id)
        for topic_id, parts in topics:
            for part in parts:
                state = sent.get((topic_id, part.partition_index))
                if state is None or self.partitions.get((state.topic, state.partition)) is not state:
                    continue  # role changed while the request was out
                await self._process(state, part)

    def _request(
        self, states: list[FetchState], session: FollowerSession
    ) -> tuple[FetchRequest, dict[tuple[uuid.UUID, int], FetchState], SessionRequest]:
        """The next Fetch of `session` for `states`; the states its answer may name."""
        from kafkapy.protocol.messages import FetchRequest
        from kafkapy.replication.follower_session import WantedPartition

        broker_epoch = -1
        reg = self._image().brokers.get(self.node_id)
        if reg is not None:
            broker_epoch = int(reg.epoch)
        wanted: list[WantedPartition] = []
        sent: dict[tuple[uuid.UUID, int], FetchState] = {}
        for s in states:
            plog = self.logs.get(s.topic, s.partition)
            if plog is None:
                continue
            wanted.append(WantedPartition(
                s.topic, s.topic_id, s.partition, plog.log_end_offset, s.leader_epoch,
                plog.leader_epochs.latest_epoch, plog.log_start_offset,
            ))
            sent[(s.topic_id, s.partition)] = s
        plan = session.build(wanted)
        request = FetchRequest(
            replica_id=self.node_id,
            replica_state=FetchRequest.ReplicaState(replica_id=self.node_id, replica_epoch=broker_epoch),
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.response_max_bytes,
            isolation_level=0,
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            topics=self._fetch_topics(plan.send),
            forgotten_topics_data=_forgotten(plan),
        )
        return request, sent, plan

    def _fetch_topics(self, send: list[WantedPartition]) -> list[FetchRequest_FetchTopic]:
        from kafkapy.protocol.messages import FetchRequest

        topics: dict[uuid.UUID, FetchRequest_FetchTopic] = {}
        for w in send:
            ft = topics.get(w.topic_id)
            if ft is None:
                ft = topics[w.topic_id] = FetchRequest.FetchTopic(topic=w.topic, topic_id=w.topic_id)
            ft.partitions.append(FetchRequest.FetchPartition(
                partition=w.partition,
                current_leader_epoch=w.leader_epoch,
                fetch_offset=w.fetch_offset,
                last_fetched_epoch=w.last_fetched_epoch,
                log_start_offset=w.log_start_offset,
                partition_max_bytes=self.max_bytes,
            ))
        return list(topics.values())

    def _follow_remote_log_start(self, state: FetchState, plog: PartitionLog, leader_log_start: int) -> None:
        """A tiered partition's log start below our local log start is in the remote tier: a
        DeleteRecords there moved it, and this replica keeps it too, so that as a new leader it
        answers the same log start (Kafka's follower `maybeIncrementLogStartOffset`), also
        after a restart (checkpointed in the partition's directory)."""
        tier = self._remote_tier()
        if tier is None:
            return
        tp = TopicIdPartition(state.topic, state.topic_id, state.partition)
        tier.advance_log_start(tp, leader_log_start, plog.directory)

    async def _process(self, state: FetchState, part: FetchedPartition) -> None:
        plog = self.logs.get(state.topic, state.partition)
        if plog is None:
            return
        code = ErrorCode(part.error_code)
        try:
            if code is ErrorCode.NONE:
                diverging = part.diverging_epoch
                if diverging is not None and (diverging[0] >= 0 or diverging[1] >= 0):
                    await self._truncate_diverged(state, plog, diverging[0], diverging[1], part.log_start_offset)
                    return
                records = part.records
                if records is not None and len(records) > 0:
                    self._append(state, plog, records)
                visible = plog.high_watermark, plog.log_start_offset
                plog.high_watermark = min(part.high_watermark, plog.log_end_offset)
                # the LSO follows open transactions here too, and snapshots are taken at roll
                self.producer_states.on_append((state.topic, state.partition), plog)
                if part.log_start_offset > plog.log_start_offset:
                    plog.follow_log_start(part.log_start_offset)
                elif part.log_start_offset < plog.log_start_offset:
                    self._follow_remote_log_start(state, plog, part.log_start_offset)
                if (plog.high_watermark, plog.log_start_offset) != visible:
                    self.replicas.on_replicated(state.topic, state.partition)
                return
            if code is ErrorCode.OFFSET_OUT_OF_RANGE:
                await self._out_of_range(state, plog, part)
                return
            if code is ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE and await self._rebuild_from_remote(state, plog):
                return
        except (ProtocolError, StorageError) as exc:
            log.warning("%s-%d: replication failed: %s", state.topic, state.partition, exc)
            state.delayed_until = trio.current_time() + self.backoff_s
            return
        log.info("%s-%d: fetch from %d: %s", state.topic, state.partition, state.leader, code.name)
        state.delayed_until = trio.current_time() + self.backoff_s

    def _append(self, state: FetchState, plog: PartitionLog, records: bytes | memoryview) -> None:
        """Whole batches from the leader; a partial tail batch (a size limit) is left for the next
        fetch, which starts at our new end."""
        data = whole_batches(records)
        if len(data) == 0:
            log.warning("%s-%d: the leader sent a partial batch only", state.topic, state.partition)
            return
        plog.append_as_follower(data)
        key = (state.topic, state.partition)
        if self.producer_states.on_replicated(key, plog, data):
            self._load_producer_state(key, plog)

    def _load_producer_state(self, key: Key, plog: PartitionLog) -> None:
        """Load a partition's producer state in the background the first time it replicates
        producer batches (after a start or a truncation); appends made meanwhile are replayed
        when the load ends (`ProducerStates.get`)."""
        async def load() -> None:
            try:
                await self.producer_states.get(key, plog)
            except Exception:  # the fetchers share the nursery: never take replication down
                log.exception("%s-%d: loading producer state failed (the next producer batch "
                              "or the first use as leader tries again)", *key)

        if self._nursery is not None:
            self._nursery.start_soon(load)

    async def _truncate_diverged(self, state: FetchState, plog: PartitionLog, epoch: int, end_offset: int, leader_start: int) -> None:
        """KIP-279: our log diverged from the leader's after `end_offset` of `epoch`. (-1, -1)
        means the leader has no epoch history at all (an empty log): keep nothing past its
        log start."""
        leo = plog.log_end_offset
        if epoch < 0 or end_offset < 0:
            target = max(leader_start, 0)
        else:
            own_epoch, own_end = plog.leader_epochs.end_offset_for(epoch, leo)
            target = min(end_offset, own_end) if own_epoch >= 0 else end_offset
        target = max(min(target, leo), 0)
        self._restart_session(state)
        log.info("%s: diverged from the leader at epoch %d (end %d): truncating %d -> %d",
                 plog.directory.name, epoch, end_offset, leo, target)
        await trio.to_thread.run_sync(plog.truncate_to, target)

    def _restart_session(self, state: FetchState) -> None:
        """After a truncation the next request is full: the leader checks the diverging epoch
        (KIP-279) on full requests only."""
        session = self.sessions.get(state.leader)
        if session is not None:
            session.reset()

    async def _out_of_range(self, state: FetchState, plog: PartitionLog, part: FetchedPartition) -> None:
        self._restart_session(state)
        leader_start = int(part.log_start_offset)
        if leader_start >= 0 and plog.log_end_offset < leader_start:
            log.info("%s-%d: behind the leader's log start %d: restarting there",
                     state.topic, state.partition, leader_start)
            await trio.to_thread.run_sync(plog.truncate_fully, leader_start)
            return
        target = max(int(part.high_watermark), plog.log_start_offset)
        log.info("%s-%d: past the leader's end: truncating to its HW %d", state.topic, state.partition, target)
        await trio.to_thread.run_sync(plog.truncate_to, target)


    async def _rebuild_from_remote(self, state: FetchState, plog: PartitionLog) -> bool:
        """OFFSET_MOVED_TO_TIERED_STORAGE (module doc): True once our log restarts after the
        leader's last remote segment below its local log; False to back off and try again.
        Raises StorageError / ProtocolError (an object store failure is a StorageError)."""
        tier = self._remote_tier()
        if tier is None:
            log.warning("%s-%d: the leader keeps our offset in the remote tier, and tiered storage "
                        "is off here", state.topic, state.partition)
            return False
        try:
            leader_local_start = await self._leader_local_start(state)
        except Exception as exc:  # PeerError, an error answer: back off, try again
            log.info("%s-%d: no local log start from the leader: %s", state.topic, state.partition, exc)
            return False
        segment = tier.follower_start_segment(TopicIdPartition(state.topic, state.topic_id, state.partition),
                                              leader_local_start)
        if segment is None:
            log.info("%s-%d: the remote segment before offset %d is not in this broker's remote "
                     "metadata yet", state.topic, state.partition, leader_local_start)
            return False
        aux = await trio.to_thread.run_sync(tier.aux_state, segment)
        self._restart_session(state)

        def rebuild() -> None:
            plog.truncate_fully(aux.next_offset)
            plog.restore_leader_epochs(aux.leader_epochs)
            if aux.producer_snapshot is not None:
                plog.write_producer_snapshot(aux.next_offset, aux.producer_snapshot)

        await trio.to_thread.run_sync(rebuild)
        log.info("%s-%d: rebuilt from the remote tier: replicating from %d (the leader's local log "
                 "starts at %d)", state.topic, state.partition, aux.next_offset, leader_local_start)
        return True

    async def _leader_local_start(self, state: FetchState) -> int:
        """The leader's local log start (ListOffsets EARLIEST_LOCAL, KIP-405)."""
        from kafkapy.protocol.messages import ListOffsetsRequest

        request = ListOffsetsRequest(replica_id=self.node_id, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=state.topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=state.partition, current_leader_epoch=state.leader_epoch,
                timestamp=EARLIEST_LOCAL)])])
        response = await self.peers.request(state.leader, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, request,
                                            timeout_s=self.request_timeout_s)
        part = response.topics[0].partitions[0]
        if part.error_code:
            raise ProtocolError(f"ListOffsets answered {ErrorCode(part.error_code).name}")
        return int(part.offset)


def _forgotten(plan: SessionRequest) -> list[FetchRequest_ForgottenTopic]:
    """`plan.forgotten` as forgotten_topics_data, one entry per topic id."""
    from kafkapy.protocol.messages import FetchRequest

    topics: dict[uuid.UUID, FetchRequest_ForgottenTopic] = {}
    for topic_id, partition in plan.forgotten:
        topics.setdefault(topic_id, FetchRequest.ForgottenTopic(topic_id=topic_id)).partitions.append(partition)
    return list(topics.values())


def whole_batches(records: bytes | memoryview) -> bytes | memoryview:
    """`records` without a trailing partial batch (cut at a size limit by some leaders)."""
    view = memoryview(records)
    pos = 0
    n = len(view)
    while n - pos >= 12:
        size = int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True) + 12
        if size < 12 or pos + size > n:
            break
        pos += size
    return view[:pos] if pos < n else records
