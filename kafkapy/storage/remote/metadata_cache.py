"""What one partition's remote tier holds, rebuilt by applying `__remote_log_metadata` records.

Rules (everything that changes the cache is `apply`; queries never change it):

1. A segment enters with its `RemoteLogSegmentMetadata` record (state COPY_SEGMENT_STARTED).
   Only COPY_SEGMENT_FINISHED segments are readable: a started copy may have uploaded some
   objects and never finish (the leader died), and a reader must never find half a segment.
2. Updates follow `RemoteLogSegmentState.can_move_to`; an update for an unknown segment or an
   illegal transition raises `RemoteMetadataError` and leaves the cache unchanged. Replaying
   a record already applied (the same update again, as after a consumer restart) is a no-op.
3. DELETE_SEGMENT_STARTED hides the segment from reads at once (its objects are going);
   DELETE_SEGMENT_FINISHED forgets it, and any record of a recently forgotten segment is a
   no-op: the leader applies its own records as soon as they are replicated, before its replay
   of the metadata topic reaches them, so the replay meets a deleted segment's earlier records
   (its add, its copy finishing, its delete starting) after it was forgotten. Applying them
   would log a bogus warning per deleted segment, or bring the deleted segment back as readable
   until the replay reached its delete.
4. A `RemotePartitionDeleteMetadata` marks the whole partition: reads stop at MARKED, and at
   DELETE_PARTITION_FINISHED every segment is forgotten.
5. Where two finished segments overlap (a new leader after an unclean election copied its own
   history), the one with the later leader epoch wins a lookup: its data is the partition's.
6. DeleteRecords below the local log start (`advance_log_start`) raises the remote log start
   to its offset, never lowers it: offsets below it are out of range even while the segment
   holding them is still remote (the remote log manager deletes the segments wholly below it).
   No metadata record carries it, so each replica checkpoints it in the partition's directory
   and the store's `persisted_log_start` seeds a partition's cache with it when replay creates
   the cache (Kafka's log-start-offset-checkpoint).
7. A segment copied after DELETE_PARTITION_FINISHED (tiering turned off with
   `remote.log.delete.on.disable`, then on again, KIP-950) starts the partition's remote tier
   afresh: readable again, no DeleteRecords log start.

The cache is pure: no I/O, no clock (queries take `now_ms`), so it is property-tested against
a model (tests/storage/remote/test_metadata_cache.py).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator

from kafkapy.storage.errors import StorageError
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.storage.remote.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    decode_remote_log_metadata,
)

__all__ = ["RemoteLogMetadataCache", "RemoteLogMetadataStore", "RemoteMetadataError"]

_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
#: forgotten segment ids remembered per partition (rule 3): the replay trails the leader's own
#: records by seconds, a window far fewer deletes than this fit in
FORGOTTEN_KEPT = 10_000


class RemoteMetadataError(StorageError):
    """A record that cannot apply to the cache (unknown segment, illegal transition)."""


def _max_epoch(segment: RemoteLogSegmentMetadata) -> int:
    return max((epoch for epoch, _ in segment.segment_leader_epochs), default=-1)


class RemoteLogMetadataCache:
    """The remote segments of one partition (module docstring for the rules)."""

    def __init__(self, partition: TopicIdPartition) -> None:
        self.partition = partition
        self._segments: dict[uuid.UUID, RemoteLogSegmentMetadata] = {}
        self._forgotten: OrderedDict[uuid.UUID, None] = OrderedDict()
        self.delete_state: RemotePartitionDeleteState | None = None
        #: the log start DeleteRecords set (rule 6; -1: none)
        self.deleted_records_offset = -1

    def apply(self, record: RemoteLogMetadata) -> None:
        """Apply one record of this partition (rules 1-4)."""
        if isinstance(record, RemotePartitionDeleteMetadata):
            self._check_partition(record.partition)
            self.delete_state = record.state
            if record.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self._segments.clear()
            return
        self._check_partition(record.segment_id.partition)
        if isinstance(record, RemoteLogSegmentMetadata):
            if self.delete_state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self.delete_state, self.deleted_records_offset = None, -1  # rule 7
            self._add(record)
        else:
            self._update(record)

    def _check_partition(self, tp: TopicIdPartition) -> None:
        if tp != self.partition:
            raise RemoteMetadataError(f"record for {tp} applied to the cache of {self.partition}")

    def _add(self, record: RemoteLogSegmentMetadata) -> None:
        key = record.segment_id.id
        if key in self._forgotten:
            return
        known = self._segments.get(key)
        if known is not None:
            if known.start_offset != record.start_offset or known.end_offset != record.end_offset:
                raise RemoteMetadataError(f"segment {key} added twice with different offsets")
            return
        if record.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise RemoteMetadataError(f"segment {key} added in state {record.state.name}")
        if record.end_offset < record.start_offset:
            raise RemoteMetadataError(f"segment {key} ends before it starts")
        self._segments[key] = record

    def _update(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        key = update.segment_id.id
        known = self._segments.get(key)
        if known is None:
            if key in self._forgotten or update.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
                return  # replayed after the segment was already forgotten
            raise RemoteMetadataError(f"update of unknown remote segment {key}")
        if known.state is update.state:
            return
        if not known.state.can_move_to(update.state):
            raise RemoteMetadataError(
                f"segment {key}: {known.state.name} cannot move to {update.state.name}")
        if update.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            del self._segments[key]
            self._forget(key)
        else:
            self._segments[key] = known.with_update(update)

    def _forget(self, key: uuid.UUID) -> None:
        self._forgotten[key] = None
        if len(self._forgotten) > FORGOTTEN_KEPT:
            self._forgotten.popitem(last=False)

    # --- queries ----------------------------------------------------------------------------
    def segments(self, state: RemoteLogSegmentState | None = None) -> list[RemoteLogSegmentMetadata]:
        """Every known segment (or those in `state`), in start-offset order."""
        found = [s for s in self._segments.values() if state is None or s.state is state]
        return sorted(found, key=lambda s: (s.start_offset, _max_epoch(s)))

    def readable_segments(self) -> list[RemoteLogSegmentMetadata]:
        """The copied segments reads may use (rules 1, 3, 4), in start-offset order."""
        if self.delete_state is not None:
            return []
        return self.segments(_FINISHED)

    def segment_for_offset(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The readable segment holding `offset` (rule 5 where segments overlap), or None."""
        best: RemoteLogSegmentMetadata | None = None
        for segment in self.readable_segments():
            if segment.start_offset > offset:
                break
            if offset <= segment.end_offset and (best is None or _max_epoch(segment) >= _max_epoch(best)):
                best = segment
        return best

    def next_segment_after(self, offset: int) -> RemoteLogSegmentMetadata | None:
        """The first readable segment starting after `offset` (a fetch crossing a boundary)."""
        return next((s for s in self.readable_segments() if s.start_offset > offset), None)

    def log_start_offset(self) -> int | None:
        """The remote log start offset: the first offset any readable segment holds, or where
        DeleteRecords moved the log start when that is later (rule 6)."""
        readable = self.readable_segments()
        if not readable:
            return None
        return max(readable[0].start_offset, self.deleted_records_offset)

    def advance_log_start(self, offset: int) -> bool:
        """DeleteRecords to `offset` (rule 6): the remote log start moves up to it. True when it
        moved (the caller checkpoints it)."""
        if offset <= self.deleted_records_offset:
            return False
        self.deleted_records_offset = offset
        return True

    def segments_below_log_start(self) -> list[RemoteLogSegmentMetadata]:
        """The readable segments wholly below the log start DeleteRecords set: what the remote
        log manager's retention pass deletes (Kafka's segment breach by log start offset)."""
        return [s for s in self.readable_segments() if s.end_offset < self.deleted_records_offset]

    def highest_copied_offset(self) -> int:
        """The last offset copied to the remote tier (-1: none); the copier resumes after it."""
        return max((s.end_offset for s in self.readable_segments()), default=-1)

    def size_bytes(self) -> int:
        """Bytes held remotely by readable segments."""
        return sum(s.segment_size_in_bytes for s in self.readable_segments())

    def segments_past_retention(
        self, *, now_ms: int, retention_ms: int, retention_bytes: int,
        local_only_bytes: int = 0, log_start_offset: int = 0,
    ) -> list[RemoteLogSegmentMetadata]:
        """The oldest readable segments the topic's retention lets go, in offset order.

        Kafka's rules for the remote tier: a segment goes when it lies wholly below the log
        start offset (DeleteRecords), when its newest record is older than `retention.ms`, or
        while the partition's size over both tiers (remote segments plus `local_only_bytes`,
        the local segments not copied yet) stays above `retention.bytes` without it. Deletion
        is oldest-first and stops at the first segment no rule lets go, so the remote log
        never gets a hole. `-1` disables a limit.
        """
        readable = self.readable_segments()
        excess = local_only_bytes + sum(s.segment_size_in_bytes for s in readable) - retention_bytes
        out: list[RemoteLogSegmentMetadata] = []
        for segment in readable:
            if any(segment.end_offset <= s.end_offset for s in out):
                out.append(segment)  # overlapped by one already going (rule 5)
                continue
            below_start = segment.end_offset < log_start_offset
            expired = retention_ms >= 0 and segment.max_timestamp_ms < now_ms - retention_ms
            oversized = retention_bytes >= 0 and excess - segment.segment_size_in_bytes >= 0
            if not (below_start or expired or oversized):
                break
            excess -= segment.segment_size_in_bytes
            out.append(segment)
        return out

    def __iter__(self) -> Iterator[RemoteLogSegmentMetadata]:
        return iter(self.segments())

    def __len__(self) -> int:
        return len(self._segments)


class RemoteLogMetadataStore:
    """The caches of every partition whose `__remote_log_metadata` records this broker replays
    (Kafka's RemotePartitionMetadataStore): what a new leader or a follower rebuilding from the
    remote tier asks. A cache is created by the first record of its partition; a record that
    cannot apply raises `RemoteMetadataError` and changes nothing - the caller logs it and goes
    on, as Kafka's consumer task does, since the next record may still apply.
    """

    def __init__(self, persisted_log_start: Callable[[TopicIdPartition], int] | None = None) -> None:
        self._caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        #: the log start DeleteRecords set that this replica checkpointed for a partition (-1:
        #: none); read once, when replay creates the partition's cache (rule 6)
        self.persisted_log_start: Callable[[TopicIdPartition], int] = persisted_log_start or (lambda tp: -1)

    def apply(self, record: RemoteLogMetadata) -> None:
        tp = record.partition if isinstance(record, RemotePartitionDeleteMetadata) else (
            record.segment_id.partition)
        cache = self._caches.get(tp)
        if cache is None:
            if not isinstance(record, RemoteLogSegmentMetadata):
                raise RemoteMetadataError(f"{type(record).__name__} for {tp}, which has no segments")
            cache = self._caches[tp] = RemoteLogMetadataCache(tp)
            cache.advance_log_start(self.persisted_log_start(tp))
        cache.apply(record)

    def apply_value(self, value: bytes) -> RemoteLogMetadata:
        """Decode one `__remote_log_metadata` record value and apply it (ProtocolError for
        bytes that are no such record)."""
        record = decode_remote_log_metadata(value)
        self.apply(record)
        return record

    def cache(self, tp: TopicIdPartition) -> RemoteLogMetadataCache | None:
        return self._caches.get(tp)

    def forget(self, tp: TopicIdPartition) -> None:
        """Drop a partition's cache (its topic is deleted, or this broker no longer hosts it)."""
        self._caches.pop(tp, None)

    def partitions(self) -> list[TopicIdPartition]:
        return sorted(self._caches)
