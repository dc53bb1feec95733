"""Copying a rolled local segment to the remote tier, and the copier's retry and lag figures.

The order is what makes a copy safe to interrupt anywhere (Kafka's `RemoteLogManager` order):

1. publish `RemoteLogSegmentMetadata` (COPY_SEGMENT_STARTED) under a fresh segment id;
2. upload every object of the segment (`layout.SegmentObject`);
3. publish the update COPY_SEGMENT_FINISHED.

Readers only use FINISHED segments, so a copy that dies in step 2 leaves orphan objects under
its own id and a STARTED record, never half a segment someone reads; the next attempt uses a
new id. `abandon` cleans such an attempt up (delete started, objects deleted, delete
finished). The local segment may be deleted only after step 3, and only once local retention
lets it go: until then nothing acknowledged exists only in the object store's hands.

`publish` is the caller's: the broker appends to `__remote_log_metadata` and waits for the
write to be acknowledged. Failures (`ObjectStoreError`, or whatever `publish` raises) propagate;
the caller retries after `CopyBackoff.delay_ms` and reports `copier_lag` meanwhile.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkapy.storage.remote.layout import (
    RemoteLogSegmentId,
    SegmentObject,
    TopicIdPartition,
    segment_object_key,
)
from kafkapy.storage.remote.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)
from kafkapy.storage.remote.object_store import ObjectStore
from kafkapy.storage.segment import segment_name

__all__ = [
    "CopierLag",
    "CopyBackoff",
    "LocalSegmentFiles",
    "RemoteLogSegmentCopier",
    "copier_lag",
    "leader_epoch_checkpoint_bytes",
]

Publish = Callable[[RemoteLogMetadata], None]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LocalSegmentFiles:
    """A rolled local segment as the copier needs it: its files and what the log knows of it.

    `end_offset` is the segment's last offset (inclusive); `leader_epochs` are the partition's
    (epoch, start offset) entries, of which those up to the segment's end are copied.
    `producer_snapshot` is the snapshot at the segment's end (`end_offset + 1`) if the log has
    one; `txn_index` None or empty means no aborted transaction ends in the segment.
    """

    base_offset: int
    end_offset: int
    max_timestamp_ms: int
    log: Path
    offset_index: Path
    time_index: Path
    txn_index: Path | None = None
    producer_snapshot: Path | None = None
    leader_epochs: tuple[tuple[int, int], ...] = ()

    @classmethod
    def in_directory(
        cls, directory: Path, base_offset: int, *, end_offset: int, max_timestamp_ms: int,
        leader_epochs: Sequence[tuple[int, int]] = (),
    ) -> LocalSegmentFiles:
        """The files of the segment at `base_offset` in a partition directory, by Kafka's names."""
        stem = directory / segment_name(base_offset)
        snapshot = directory / f"{segment_name(end_offset + 1)}.snapshot"
        txn_index = stem.with_suffix(".txnindex")
        return cls(
            base_offset=base_offset, end_offset=end_offset, max_timestamp_ms=max_timestamp_ms,
            log=stem.with_suffix(".log"), offset_index=stem.with_suffix(".index"),
            time_index=stem.with_suffix(".timeindex"),
            txn_index=txn_index if txn_index.exists() else None,
            producer_snapshot=snapshot if snapshot.exists() else None,
            leader_epochs=tuple(leader_epochs))

    def segment_leader_epochs(self) -> tuple[tuple[int, int], ...]:
        """The epochs with records in this segment, each from where it starts within it."""
        inside = [(e, max(o, self.base_offset)) for e, o in self.leader_epochs if o <= self.end_offset]
        starts_inside = [i for i, (_, o) in enumerate(inside) if o == self.base_offset]
        return tuple(inside[starts_inside[-1]:] if starts_inside else inside)

    def txn_index_empty(self) -> bool:
        return self.txn_index is None or self.txn_index.stat().st_size == 0


def leader_epoch_checkpoint_bytes(entries: Sequence[tuple[int, int]], end_offset: int) -> bytes:
    """Kafka's leader-epoch-checkpoint text for the entries that start at or before `end_offset`
    (version 0, count, `epoch offset` lines): what a follower rebuilding from the remote tier
    restores."""
    kept = [(e, o) for e, o in entries if o <= end_offset]
    return ("0\n" + f"{len(kept)}\n" + "".join(f"{e} {o}\n" for e, o in kept)).encode()


class RemoteLogSegmentCopier:
    """Copies segments of one broker to one object store (module docstring for the order)."""

    def __init__(self, store: ObjectStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id

    def copy(
        self, partition: TopicIdPartition, files: LocalSegmentFiles, *, leader_epoch: int,
        publish: Publish, now_ms: int, segment_uuid: uuid.UUID | None = None,
    ) -> RemoteLogSegmentMetadata:
        """Copy one rolled segment; returns its metadata as of COPY_SEGMENT_FINISHED."""
        segment_id = RemoteLogSegmentId(partition, segment_uuid or uuid.uuid4())
        started = RemoteLogSegmentMetadata(
            segment_id, files.base_offset, files.end_offset, self.broker_id,
            files.max_timestamp_ms, now_ms, files.segment_leader_epochs(),
            files.log.stat().st_size, txn_index_empty=files.txn_index_empty(),
            broker_leader_epoch=leader_epoch)
        publish(started)
        self._upload(started, files)
        done = RemoteLogSegmentMetadataUpdate(
            segment_id, self.broker_id, now_ms, RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            broker_leader_epoch=leader_epoch, end_offset=files.end_offset)
        publish(done)
        return started.with_update(done)

    def _upload(self, metadata: RemoteLogSegmentMetadata, files: LocalSegmentFiles) -> None:
        def key(kind: SegmentObject) -> str:
            return segment_object_key(metadata.segment_id, metadata.start_offset, kind)

        # indexes and snapshots first, the segment last: the biggest upload is the likeliest to
        # fail, and a retry then has the least to redo
        self.store.put_file(key(SegmentObject.OFFSET_INDEX), files.offset_index)
        self.store.put_file(key(SegmentObject.TIME_INDEX), files.time_index)
        if not metadata.txn_index_empty and files.txn_index is not None:
            self.store.put_file(key(SegmentObject.TRANSACTION_INDEX), files.txn_index)
        if files.producer_snapshot is not None:
            self.store.put_file(key(SegmentObject.PRODUCER_SNAPSHOT), files.producer_snapshot)
        self.store.put(key(SegmentObject.LEADER_EPOCH_CHECKPOINT),
                       leader_epoch_checkpoint_bytes(files.leader_epochs, files.end_offset))
        self.store.put_file(key(SegmentObject.SEGMENT), files.log)

    def delete(self, metadata: RemoteLogSegmentMetadata, *, publish: Publish, now_ms: int) -> None:
        """Remove a copied (or half-copied) segment: DELETE_SEGMENT_STARTED, its objects, then
        DELETE_SEGMENT_FINISHED - retention, and the clean-up of an abandoned copy.

        The `.log` object goes last, as it is written last: a bucket listing never shows a
        segment's indexes, snapshot or checkpoint without its `.log` once a delete began (S3's
        DeleteObjects removes a batch one key at a time)."""
        def update(state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
            return RemoteLogSegmentMetadataUpdate(metadata.segment_id, self.broker_id, now_ms, state)

        if metadata.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            publish(update(RemoteLogSegmentState.DELETE_SEGMENT_STARTED))
        self.store.delete(
            segment_object_key(metadata.segment_id, metadata.start_offset, kind)
            for kind in SegmentObject if kind is not SegmentObject.SEGMENT)
        self.store.delete([segment_object_key(metadata.segment_id, metadata.start_offset, SegmentObject.SEGMENT)])
        publish(update(RemoteLogSegmentState.DELETE_SEGMENT_FINISHED))


@dataclasses.dataclass(frozen=True, slots=True)
class CopyBackoff:
    """Exponential backoff with jitter between copy attempts (Kafka's
    `remote.log.manager.copier.retry.backoff.ms` / `.max.ms`, jitter 0.2)."""

    initial_ms: int = 500
    max_ms: int = 30_000
    multiplier: float = 2.0
    jitter: float = 0.2

    def delay_ms(self, failures: int, random_unit: float) -> int:
        """The wait after `failures` consecutive failures (>= 1); `random_unit` in [0, 1)."""
        base = min(self.max_ms, self.initial_ms * self.multiplier ** max(0, failures - 1))
        spread = base * self.jitter * (2 * random_unit - 1)
        return max(0, min(self.max_ms, round(base + spread)))


@dataclasses.dataclass(frozen=True, slots=True)
class CopierLag:
    """What is waiting to be copied: Kafka's RemoteCopyLagSegments / RemoteCopyLagBytes."""

    segments: int
    bytes: int


def copier_lag(rolled: Sequence[tuple[int, int, int]], highest_copied_offset: int) -> CopierLag:
    """The lag over the rolled (not active) local segments, given as (base offset, end offset,
    size): those ending past the highest copied offset are not in the remote tier yet."""
    pending = [(base, size) for base, end, size in rolled if end > highest_copied_offset]
    return CopierLag(len(pending), sum(size for _, size in pending))
