"""The read side of the remote tier (KIP-405): Fetch and ListOffsets below the local log start.

What is remote comes from `RemoteLogMetadataStore` (replayed from `__remote_log_metadata` by the
remote log manager, which owns it and the object store); the bytes come through one
`RemoteLogReader` (ranged GETs, bounded chunk and index cache). A topic is tiered when it has
`remote.storage.enable=true` and the broker has a `RemoteTier` (`remote.log.storage.system.enable`).

Offsets, as Kafka's `UnifiedLog` names them: the *local* log start is where the local log's
segments begin (`PartitionLog.log_start_offset`); the partition's log start - what Fetch and
ListOffsets EARLIEST answer - is the remote tier's first offset when it has one below that.

Fetch (Kafka's `ReplicaManager.handleOffsetOutOfRangeError`): an offset in
[log start, local log start) of a tiered topic is

- for a follower: OFFSET_MOVED_TO_TIERED_STORAGE (it rebuilds from the remote tier and goes
  on from the local log start, `server/cluster/replica_fetcher.py`);
- for a consumer: read from the remote tier - at most one partition per fetch request (the
  others needing remote data answer empty this round, as Kafka's `RemoteStorageFetchInfo`
  goes to the first only), on a worker thread so the event loop never waits on the store,
  within `remote.fetch.max.wait.ms` (past it the partition answers empty, Kafka's
  DelayedRemoteFetch expiring). A store failure answers UNKNOWN_SERVER_ERROR for that
  partition, what Kafka's `Errors.forException` makes of a `RemoteStorageException` (clients
  log it and fetch again); the fetch's local partitions are answered as usual.

The metadata cache is touched on the event loop only: a remote read takes a snapshot of the
readable segments from its offset on (`RemoteFetch.segments`) to its worker thread.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from bisect import bisect_right
from pathlib import Path

from kafkapy.broker.config import BrokerConfig
from kafkapy.broker.runtime import ThreadLimiter
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import iter_batches
from kafkapy.storage.checkpoint import write_remote_log_start
from kafkapy.storage.errors import KafkaStorageError, StorageError
from kafkapy.storage.remote.layout import SegmentObject, TopicIdPartition
from kafkapy.storage.remote.metadata import RemoteLogSegmentMetadata
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataCache, RemoteLogMetadataStore
from kafkapy.storage.remote.object_store import ObjectStore
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.txn_index import AbortedTxnEntry

__all__ = [
    "REMOTE_STORAGE_ENABLE",
    "RemoteAuxState",
    "RemoteFetch",
    "RemoteFetched",
    "RemoteTier",
    "epoch_for_offset",
    "is_tiered",
    "parse_leader_epoch_checkpoint",
]

log = logging.getLogger(__name__)

REMOTE_STORAGE_ENABLE = "remote.storage.enable"
REMOTE_FETCH_MAX_WAIT_MS = 500  # Kafka's `remote.fetch.max.wait.ms` default
REMOTE_READER_THREADS = 4
"""Worker threads reading the remote tier at once (Kafka's `remote.log.reader.threads`, there
10): each holds at most a partition's max bytes; further remote reads queue for a thread."""


def is_tiered(configs: dict[str, str]) -> bool:
    """A topic's override set asks for the remote tier (`remote.storage.enable=true`)."""
    return configs.get(REMOTE_STORAGE_ENABLE, "false").strip().lower() == "true"


def epoch_for_offset(entries: tuple[tuple[int, int], ...] | list[tuple[int, int]], offset: int) -> int:
    """The leader epoch of `offset` in (epoch, start offset) entries (-1: before them all)."""
    starts = [start for _, start in entries]
    i = bisect_right(starts, offset) - 1
    return entries[i][0] if i >= 0 else -1


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteFetch:
    """The one partition of a fetch served from the remote tier (Kafka's RemoteStorageFetchInfo).

    `segments`: the readable remote segments from the one holding `fetch_offset` on, as the
    event loop saw them. `max_offset` (exclusive) is the high watermark or, read_committed, the
    last stable offset; `min_one`: the first partition of the response, which gets a whole
    batch even when it is larger than `max_bytes` (KIP-74)."""

    partition: TopicIdPartition
    fetch_offset: int
    max_bytes: int
    max_offset: int
    segments: tuple[RemoteLogSegmentMetadata, ...]
    read_committed: bool = False
    min_one: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteFetched:
    """Whole batches read from the remote tier, and for read_committed the aborted transactions
    overlapping them found in the copied transaction indexes. `aborted_complete` False: the
    search ran out of remote segments before the end of the range, and the local log's
    transaction index holds the rest."""

    records: bytes
    next_offset: int
    aborted: tuple[AbortedTxnEntry, ...] = ()
    aborted_complete: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteAuxState:
    """What a follower takes from the remote tier before it replicates from the leader's local
    log start (Kafka's ReplicaFetcherTierStateMachine): where to start (after the remote segment
    holding the offset before the leader's local log start), the leader epochs up to there, and
    the producer state as of there (None: the leader had no producer snapshot)."""

    next_offset: int
    leader_epochs: tuple[tuple[int, int], ...]
    producer_snapshot: bytes | None


def parse_leader_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of Kafka's leader-epoch-checkpoint text (version 0, count,
    `epoch offset` lines). ProtocolError when it is not one."""
    try:
        lines = data.decode("ascii").splitlines()
        count = int(lines[1])
        entries = [(int(e), int(o)) for e, o in (line.split(" ") for line in lines[2:2 + count])]
    except (UnicodeDecodeError, ValueError, IndexError) as exc:
        raise ProtocolError(f"not a leader-epoch checkpoint: {exc}") from exc
    if lines[0] != "0" or len(entries) != count:
        raise ProtocolError("not a version 0 leader-epoch checkpoint")
    return entries


def _cut_at(records: bytes, max_offset: int) -> tuple[bytes, int]:
    """The whole batches of `records` whose last offset is below `max_offset`."""
    end = 0
    next_offset = -1
    for pos, header in iter_batches(records):
        last = header.base_offset + header.last_offset_delta
        if last >= max_offset:
            break
        end = pos + 12 + header.batch_length
        next_offset = last + 1
    return records[:end], next_offset


class RemoteTier:
    """The broker's remote tier as the read side uses it: which segments are remote (the
    metadata store the remote log manager keeps) and a reader for their bytes."""

    def __init__(
        self, metadata: RemoteLogMetadataStore, reader: RemoteLogReader, *,
        fetch_max_wait_ms: int = REMOTE_FETCH_MAX_WAIT_MS, reader_threads: int = REMOTE_READER_THREADS,
    ) -> None:
        self.metadata = metadata
        self.reader = reader
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.reader_threads = reader_threads
        #: the worker-thread bound, made by the first remote read (on the event loop)
        self.limiter: ThreadLimiter | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig, metadata: RemoteLogMetadataStore, store: ObjectStore) -> RemoteTier:
        """The read side over the remote log manager's metadata store and object store, with the
        broker's `remote.fetch.max.wait.ms`."""
        return cls(metadata, RemoteLogReader(store), fetch_max_wait_ms=config.get_int("remote.fetch.max.wait.ms"))

    def cache(self, topic: str, topic_id: uuid.UUID, partition: int) -> RemoteLogMetadataCache | None:
        return self.metadata.cache(TopicIdPartition(topic, topic_id, partition))

    def log_start_offset(self, topic: str, topic_id: uuid.UUID, partition: int, local_start: int) -> int:
        """The partition's log start over both tiers."""
        cache = self.cache(topic, topic_id, partition)
        remote = cache.log_start_offset() if cache is not None else None
        return local_start if remote is None else min(remote, local_start)

    def advance_log_start(self, tp: TopicIdPartition, offset: int, directory: Path) -> None:
        """DeleteRecords below the local log start (on the leader, or as a follower learns it
        from the leader's fetch answers): the remote log start moves up to `offset` and, when it
        moved, is checkpointed in the partition's `directory` so a restart keeps it (the replay
        of `__remote_log_metadata` seeds the cache with it). The checkpoint is written first:
        when it fails (KafkaStorageError) the log start stays where it was."""
        cache = self.metadata.cache(tp)
        start = cache.log_start_offset() if cache is not None else None
        if cache is None or start is None or offset <= start:
            return  # not a move: no checkpoint write per fetch on a follower
        try:
            write_remote_log_start(directory, offset)
        except OSError as exc:
            raise KafkaStorageError(f"checkpointing the remote log start of {tp}: {exc}") from exc
        cache.advance_log_start(offset)

    def plan(
        self, tp: TopicIdPartition, fetch_offset: int, local_start: int, *, follower: bool,
    ) -> tuple[RemoteLogSegmentMetadata, ...] | ErrorCode:
        """What an offset out of the local log's range means on a tiered topic (module doc):
        the remote segments to read from, OFFSET_MOVED_TO_TIERED_STORAGE for a follower, or
        OFFSET_OUT_OF_RANGE when the offset is in neither tier."""
        cache = self.metadata.cache(tp)
        remote_start = cache.log_start_offset() if cache is not None else None
        if cache is None or remote_start is None or not remote_start <= fetch_offset < local_start:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        if follower:
            return ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
        first = cache.segment_for_offset(fetch_offset) or cache.next_segment_after(fetch_offset)
        if first is None:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        later = [s for s in cache.readable_segments() if s.start_offset > first.end_offset]
        return (first, *later)

    def follower_start_segment(self, tp: TopicIdPartition, leader_local_start: int) -> RemoteLogSegmentMetadata | None:
        """The remote segment holding the offset before the leader's local log start: what a
        follower told OFFSET_MOVED_TO_TIERED_STORAGE rebuilds from; None while this broker's
        metadata does not know it yet (the follower tries again)."""
        cache = self.metadata.cache(tp)
        return cache.segment_for_offset(leader_local_start - 1) if cache is not None else None

    # -- worker thread ----------------------------------------------------------------------------
    def aux_state(self, segment: RemoteLogSegmentMetadata) -> RemoteAuxState:
        """The follower's start state from one copied segment (worker thread): its leader-epoch
        checkpoint and producer snapshot. Raises ObjectStoreError, ProtocolError."""
        checkpoint = self.reader.segment_object(segment, SegmentObject.LEADER_EPOCH_CHECKPOINT)
        if checkpoint is None:
            raise ProtocolError(f"remote segment {segment.segment_id.id} has no leader-epoch checkpoint")
        snapshot = self.reader.segment_object(segment, SegmentObject.PRODUCER_SNAPSHOT)
        epochs = tuple(parse_leader_epoch_checkpoint(checkpoint))
        return RemoteAuxState(segment.end_offset + 1, epochs, snapshot)

    def read(self, fetch: RemoteFetch) -> RemoteFetched:
        """Serve `fetch` (worker thread): the first segment with a batch at or after the fetch
        offset, as Kafka's RemoteLogManager reads one segment per fetch. Raises
        ObjectStoreError / StorageError / ProtocolError."""
        offset = fetch.fetch_offset
        for segment in fetch.segments:
            if segment.end_offset < offset:
                continue
            result = self.reader.read(segment, max(offset, segment.start_offset), fetch.max_bytes)
            if not result.records:
                offset = max(offset, result.next_offset)
                continue
            records, next_offset = _cut_at(result.records, fetch.max_offset)
            if not records:
                return RemoteFetched(b"", offset)
            if not fetch.min_one and len(records) > fetch.max_bytes:
                return RemoteFetched(b"", offset)
            if not fetch.read_committed:
                return RemoteFetched(records, next_offset)
            aborted, complete = self._aborted(fetch, fetch.fetch_offset, next_offset)
            return RemoteFetched(records, next_offset, aborted, complete)
        return RemoteFetched(b"", offset)

    def _aborted(self, fetch: RemoteFetch, start: int, end: int) -> tuple[tuple[AbortedTxnEntry, ...], bool]:
        """Aborted transactions meeting [start, end) from the transaction indexes of the fetched
        segment and the later ones (an entry sits in the segment of its marker, which may come
        long after the records): complete at the first entry ending at or past `end`, as
        Kafka's transaction index search is; segments without one cost no GET."""
        found: list[AbortedTxnEntry] = []
        for segment in fetch.segments:
            if segment.end_offset < start:
                continue
            entries = self.reader.aborted_transactions(segment, start, end)
            found.extend(entries)
            if any(e.last_offset >= end for e in entries):
                return tuple(found), True
        return tuple(found), False

    def offset_for_timestamp(
        self, segments: tuple[RemoteLogSegmentMetadata, ...], timestamp: int, start_offset: int,
    ) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first remote record at or after
        `start_offset` with a timestamp >= `timestamp` (worker thread), or None."""
        for segment in segments:
            if segment.max_timestamp_ms < timestamp or segment.end_offset < start_offset:
                continue
            hit = self.reader.offset_for_timestamp(segment, timestamp, start_offset)
            if hit is not None:
                return hit[0], hit[1], epoch_for_offset(segment.segment_leader_epochs, hit[0])
        return None


def remote_read_failure(tp: TopicIdPartition, exc: BaseException) -> ErrorCode:
    """The code a failed remote read answers (module doc): UNKNOWN_SERVER_ERROR, logged - a
    store failure as a warning, anything else (a bug, bytes not as copied) with its trace."""
    if isinstance(exc, StorageError | ProtocolError):
        log.warning("remote read of %s failed: %s", tp, exc)
    else:
        log.error("remote read of %s failed", tp, exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR
