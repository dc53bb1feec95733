"""The remote log manager (KIP-405's `RemoteLogManager`): what this broker copies to the remote
tier, what it deletes there, and what it knows is remote.

Why in the broker layer and synchronous: every decision here (which rolled segment is next,
which remote segments retention lets go, how far behind the copier is) is a function of the
local logs, the replayed `__remote_log_metadata` records and the clock; the object-store calls
block for seconds. So the class is plain - the server layer (`kafkapy.server.remote_log_tasks`)
calls `run_copies` / `run_remote_retention` in a worker thread with a blocking `publish`, and
feeds `apply_value` with the metadata topic's records - and a unit test drives it with a fake
store and `now_ms`.

Rules (Kafka's):

1. Only the partition's leader copies; a segment is a candidate once it is rolled (not the
   active one) and wholly below the last stable offset (never uncommitted or undecided data).
   Copying resumes after the highest offset the remote tier holds (`highest_copied_offset` of
   the replayed metadata), so a new leader carries on where the old one stopped.
2. A failed copy (store down, publish refused) is retried after `CopyBackoff`; the local
   segment stays (the log's `remote_copied_offset` does not move, and local retention never
   deletes past it). `copier_lag` says what waits.
3. Remote retention (leader only): `retention.ms` / `retention.bytes` over both tiers
   (`segments_past_retention`) and the segments wholly below a log start DeleteRecords set
   (`segments_below_log_start`), DELETE_SEGMENT_STARTED, the objects, DELETE_SEGMENT_FINISHED.
4. A deleted topic's partitions are deleted remotely by the broker that leads the metadata
   partition carrying their records (exactly one broker, and its publish is local); so are
   those of a topic whose `remote.storage.enable` was turned off with
   `remote.log.delete.on.disable=true` (KIP-950).
5. A copy that never finished (the process stopped mid-upload, or an earlier leader died) is
   deleted by the leader before it copies: its objects go, DELETE_SEGMENT_STARTED/FINISHED.
   A failed clean-up backs the partition off as a failed copy does (rule 2): a store that is
   down is not asked again at every task run.

For the read side: `metadata` (the store `kafkapy.broker.remote_fetch.RemoteTier` reads on the
event loop), `remote_segments(tp)` and `remote_log_start_offset(tp)`. Records are applied on
the event loop only (the replay, and each publish once replicated); the worker threads' reads
take a lock the applies take too.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import random
import threading
import uuid
from collections.abc import Callable, Iterable

from kafkapy.protocol.errors import ProtocolError
from kafkapy.storage import PartitionLog
from kafkapy.storage.remote.copier import (
    CopierLag,
    CopyBackoff,
    LocalSegmentFiles,
    RemoteLogSegmentCopier,
    copier_lag,
)
from kafkapy.storage.remote.layout import TopicIdPartition, partition_prefix
from kafkapy.storage.remote.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    metadata_partition,
)
from kafkapy.storage.remote.metadata_cache import (
    RemoteLogMetadataCache,
    RemoteLogMetadataStore,
    RemoteMetadataError,
)
from kafkapy.storage.remote.object_store import ObjectStore

__all__ = [
    "REMOTE_LOG_METADATA_TOPIC",
    "Publish",
    "RemoteLogManager",
    "TieredReplica",
    "metadata_topic_configs",
]

log = logging.getLogger(__name__)

#: Kafka's internal topic of remote segment metadata (TopicBasedRemoteLogMetadataManager)
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"

#: append one record to `__remote_log_metadata`, return once it is replicated and applied to
#: the manager (`apply`, on the event loop); raise if it could not be
Publish = Callable[[RemoteLogMetadata], None]


def metadata_topic_configs(retention_ms: int) -> dict[str, str]:
    """The metadata topic's configs, as Kafka creates it: delete policy, kept by default."""
    return {"cleanup.policy": "delete", "retention.ms": str(retention_ms)}


@dataclasses.dataclass(frozen=True, slots=True)
class TieredReplica:
    """One local replica of a `remote.storage.enable` topic on a task run; `leader_epoch` is
    None on a follower (it learns what is remote from the metadata and copies nothing)."""

    partition: TopicIdPartition
    log: PartitionLog
    leader_epoch: int | None


@dataclasses.dataclass(slots=True)
class _CopyState:
    """A partition's copier: consecutive failures, when it may try again, what waits."""

    failures: int = 0
    retry_at_ms: int = 0
    lag: CopierLag = dataclasses.field(default_factory=lambda: CopierLag(0, 0))
    last_error: str = ""


@dataclasses.dataclass(slots=True)
class RemoteLogCounters:
    """Totals since start (Prometheus counters)."""

    copied_segments: int = 0
    copied_bytes: int = 0
    copy_failures: int = 0
    deleted_segments: int = 0
    delete_failures: int = 0


def _rolled(plog: PartitionLog) -> list[tuple[int, int, int]]:
    """(base offset, end offset, size) of the non-empty rolled segments, in offset order."""
    segments = list(plog.segments)
    out = []
    for seg, nxt in itertools.pairwise(segments):
        end = nxt.base_offset - 1
        if end >= seg.base_offset and seg.size > 0:
            out.append((seg.base_offset, end, seg.size))
    return out


class RemoteLogManager:
    """See the module docstring."""

    def __init__(
        self, store: ObjectStore, *, broker_id: int, metadata_partitions: int,
        backoff: CopyBackoff | None = None, random_unit: Callable[[], float] = random.random,
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.metadata_partitions = metadata_partitions
        self.copier = RemoteLogSegmentCopier(store, broker_id)
        self.backoff = backoff or CopyBackoff()
        self.counters = RemoteLogCounters()
        self._random = random_unit
        self._metadata = RemoteLogMetadataStore()
        self._lock = threading.Lock()
        self._copy_state: dict[TopicIdPartition, _CopyState] = {}

    # --- the replayed metadata ----------------------------------------------------------------
    def apply(self, record: RemoteLogMetadata) -> bool:
        """Apply one record (replayed, or just published); False if it cannot apply."""
        with self._lock:
            try:
                self._metadata.apply(record)
            except RemoteMetadataError as exc:
                log.warning("ignoring %s record: %s", REMOTE_LOG_METADATA_TOPIC, exc)
                return False
        return True

    def apply_value(self, value: bytes) -> bool:
        """Apply one `__remote_log_metadata` record value; False (logged) if unreadable."""
        with self._lock:
            try:
                self._metadata.apply_value(value)
            except (ProtocolError, RemoteMetadataError) as exc:
                log.warning("ignoring %s record: %s", REMOTE_LOG_METADATA_TOPIC, exc)
                return False
        return True

    @property
    def metadata(self) -> RemoteLogMetadataStore:
        """The replayed metadata of every partition, for the read side (`RemoteTier`): changed
        only on the event loop (`apply`, `apply_value`), so the loop reads it without the lock."""
        return self._metadata

    def metadata_partition(self, tp: TopicIdPartition) -> int:
        """The `__remote_log_metadata` partition carrying `tp`'s records (Kafka's partitioner)."""
        return metadata_partition(tp, self.metadata_partitions)

    def cache(self, tp: TopicIdPartition) -> RemoteLogMetadataCache | None:
        """The replayed remote metadata of `tp` (None: nothing remote known). Read it under no
        lock only from the event loop; `remote_segments` is the thread-safe copy."""
        return self._metadata.cache(tp)

    def remote_segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        """The readable (COPY_SEGMENT_FINISHED) remote segments of `tp`, in offset order: their
        start/end offsets, max timestamps, leader epochs and sizes."""
        with self._lock:
            cache = self._metadata.cache(tp)
            return [] if cache is None else cache.readable_segments()

    def remote_log_start_offset(self, tp: TopicIdPartition) -> int | None:
        """The first offset the remote tier holds (None: nothing remote)."""
        with self._lock:
            cache = self._metadata.cache(tp)
            return None if cache is None else cache.log_start_offset()

    def highest_copied_offset(self, tp: TopicIdPartition) -> int:
        with self._lock:
            cache = self._metadata.cache(tp)
            return -1 if cache is None else cache.highest_copied_offset()

    def remote_bytes_by_topic(self) -> dict[str, int]:
        """Bytes of readable remote segments per topic (the remote half of the topic's size)."""
        out: dict[str, int] = {}
        with self._lock:
            for tp in self._metadata.partitions():
                cache = self._metadata.cache(tp)
                if cache is not None:
                    out[tp.topic] = out.get(tp.topic, 0) + cache.size_bytes()
        return out

    def copier_lag_by_topic(self) -> dict[str, CopierLag]:
        """Segments and bytes rolled locally and not copied yet, per topic (leaders only)."""
        out: dict[str, CopierLag] = {}
        with self._lock:
            states = list(self._copy_state.items())
        for tp, state in states:
            was = out.get(tp.topic, CopierLag(0, 0))
            out[tp.topic] = CopierLag(was.segments + state.lag.segments, was.bytes + state.lag.bytes)
        return out

    # --- copying (worker thread) --------------------------------------------------------------
    def sync_copied_offsets(self, replicas: Iterable[TieredReplica]) -> None:
        """Tell each tiered log what the remote tier holds, so local retention may delete it."""
        for replica in replicas:
            replica.log.remote_copied_offset = self.highest_copied_offset(replica.partition)

    def forget_leadership(self, keep: Iterable[TopicIdPartition]) -> None:
        """Drop the copier state (and lag) of partitions no longer led here."""
        kept = set(keep)
        with self._lock:
            for tp in [tp for tp in self._copy_state if tp not in kept]:
                del self._copy_state[tp]

    def run_copies(self, replicas: Iterable[TieredReplica], publish: Publish, now_ms: int) -> int:
        """Copy every candidate segment of the leaders among `replicas` (rule 1), oldest first,
        a partition stopping at its first failure (rule 2). Returns the segments copied."""
        leaders = [r for r in replicas if r.leader_epoch is not None]
        self.forget_leadership(r.partition for r in leaders)
        copied = 0
        for replica in leaders:
            if now_ms >= self._state(replica.partition).retry_at_ms:  # not while backing off
                self._clean_up_abandoned(replica, publish, now_ms)
            if replica.log.config.extra.get("remote.log.copy.disable", "").strip().lower() == "true":
                continue
            copied += self._copy_partition(replica, publish, now_ms)
        return copied

    def _clean_up_abandoned(self, replica: TieredReplica, publish: Publish, now_ms: int) -> None:
        """Delete the copies that never finished (rule 5): started by this broker (it is not
        copying the partition now, so they died with an earlier run or process) or by an
        earlier leader, and the deletions that never finished."""
        epoch = replica.leader_epoch if replica.leader_epoch is not None else -1
        with self._lock:
            cache = self._metadata.cache(replica.partition)
            if cache is None:
                return
            stuck = [s for s in cache.segments(RemoteLogSegmentState.COPY_SEGMENT_STARTED)
                     if s.broker_id == self.broker_id or s.broker_leader_epoch < epoch]
            stuck += cache.segments(RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        for segment in stuck:
            try:
                self.copier.delete(segment, publish=publish, now_ms=now_ms)
            except Exception as exc:  # the store is down: the copier backs off with it
                self.counters.delete_failures += 1
                state = self._state(replica.partition)
                self._back_off(state, now_ms, exc)
                log.warning("cleaning up remote segment %s of %s failed (attempt %d, next in "
                            "%d ms): %s", segment.segment_id.id, replica.partition,
                            state.failures, state.retry_at_ms - now_ms, exc)
                return
            log.info("deleted the unfinished remote copy %s of %s (offsets %d-%d)",
                     segment.segment_id.id, replica.partition, segment.start_offset,
                     segment.end_offset)

    def _back_off(self, state: _CopyState, now_ms: int, exc: Exception) -> None:
        """One more consecutive failure: the partition's copies and clean-ups wait."""
        state.failures += 1
        state.retry_at_ms = now_ms + self.backoff.delay_ms(state.failures, self._random())
        state.last_error = str(exc)

    def _state(self, tp: TopicIdPartition) -> _CopyState:
        with self._lock:
            return self._copy_state.setdefault(tp, _CopyState())

    def _copy_partition(self, replica: TieredReplica, publish: Publish, now_ms: int) -> int:
        tp, plog = replica.partition, replica.log
        state = self._state(tp)
        copied = 0
        while True:
            rolled = _rolled(plog)
            highest = self.highest_copied_offset(tp)
            state.lag = copier_lag(rolled, highest)
            plog.remote_copied_offset = highest
            upper = plog.last_stable_offset
            candidate = next((r for r in rolled if r[1] > highest and r[1] < upper), None)
            if candidate is None or now_ms < state.retry_at_ms:
                return copied
            if not self._copy_one(replica, candidate, publish, now_ms, state):
                return copied
            copied += 1

    def _copy_one(
        self, replica: TieredReplica, segment: tuple[int, int, int], publish: Publish,
        now_ms: int, state: _CopyState,
    ) -> bool:
        base, end, size = segment
        plog = replica.log
        assert replica.leader_epoch is not None
        try:
            seg = next(s for s in list(plog.segments) if s.base_offset == base)
            files = LocalSegmentFiles.in_directory(
                plog.directory, base, end_offset=end, max_timestamp_ms=seg.largest_timestamp(),
                leader_epochs=plog.leader_epochs.entries)
            self.copier.copy(replica.partition, files, leader_epoch=replica.leader_epoch,
                             publish=publish, now_ms=now_ms)
        except Exception as exc:  # store down, publish refused, segment gone: retry later
            self._back_off(state, now_ms, exc)
            self.counters.copy_failures += 1
            log.warning("copying %s segment %d to the remote tier failed (attempt %d, next in "
                        "%d ms): %s", replica.partition, base, state.failures,
                        state.retry_at_ms - now_ms, exc)
            return False
        state.failures, state.retry_at_ms, state.last_error = 0, 0, ""
        self.counters.copied_segments += 1
        self.counters.copied_bytes += size
        plog.remote_copied_offset = self.highest_copied_offset(replica.partition)
        log.info("copied %s offsets %d-%d (%d bytes) to the remote tier",
                 replica.partition, base, end, size)
        return True

    # --- remote retention (worker thread) -----------------------------------------------------
    def run_remote_retention(
        self, replicas: Iterable[TieredReplica], publish: Publish, now_ms: int
    ) -> int:
        """Delete the remote segments the leaders' topics' `retention.*` let go (rule 3);
        returns how many went."""
        deleted = 0
        for replica in replicas:
            if replica.leader_epoch is None:
                continue
            for segment in self._past_retention(replica, now_ms):
                try:
                    self.copier.delete(segment, publish=publish, now_ms=now_ms)
                except Exception as exc:
                    self.counters.delete_failures += 1
                    log.warning("deleting remote segment %s of %s failed: %s",
                                segment.segment_id.id, replica.partition, exc)
                    break
                deleted += 1
                self.counters.deleted_segments += 1
        return deleted

    def _past_retention(self, replica: TieredReplica, now_ms: int) -> list[RemoteLogSegmentMetadata]:
        plog = replica.log
        with self._lock:
            cache = self._metadata.cache(replica.partition)
            if cache is None:
                return []
            highest = cache.highest_copied_offset()
            local_only = sum(size for _, end, size in _rolled(plog) if end > highest)
            if plog.segments:
                local_only += plog.segments[-1].size
            expired = cache.segments_past_retention(
                now_ms=now_ms, retention_ms=plog.config.retention_ms,
                retention_bytes=plog.config.retention_bytes, local_only_bytes=local_only)
            ids = {s.segment_id.id for s in expired}
            below = [s for s in cache.segments_below_log_start() if s.segment_id.id not in ids]
            return sorted([*expired, *below], key=lambda s: s.start_offset)

    # --- deleted topics (worker thread) -------------------------------------------------------
    def known_partitions(self, topic_id: uuid.UUID) -> list[TopicIdPartition]:
        """The partitions of a topic incarnation with remote metadata here."""
        with self._lock:
            return [tp for tp in self._metadata.partitions() if tp.topic_id == topic_id]

    def undeleted_partitions(self, topic_id: uuid.UUID) -> list[TopicIdPartition]:
        """The partitions of a topic incarnation whose remote data is not deleted yet (no
        DELETE_PARTITION_FINISHED since their last copy)."""
        finished = RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
        with self._lock:
            return [tp for tp in self._metadata.partitions() if tp.topic_id == topic_id
                    and (cache := self._metadata.cache(tp)) is not None and cache.delete_state is not finished]

    def delete_partition(self, tp: TopicIdPartition, publish: Publish, now_ms: int) -> None:
        """Delete a deleted topic's partition from the remote tier (rule 4): marked, started,
        every object under its prefix, finished (the cache then holds no segment of it)."""
        def mark(state: RemotePartitionDeleteState) -> None:
            publish(RemotePartitionDeleteMetadata(tp, self.broker_id, now_ms, state))

        mark(RemotePartitionDeleteState.DELETE_PARTITION_MARKED)
        mark(RemotePartitionDeleteState.DELETE_PARTITION_STARTED)
        self.store.delete(info.key for info in self.store.list(partition_prefix(tp)))
        mark(RemotePartitionDeleteState.DELETE_PARTITION_FINISHED)
        log.info("deleted %s from the remote tier", tp)
