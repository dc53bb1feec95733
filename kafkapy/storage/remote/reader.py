"""Serving a fetch from the remote tier: from an offset, whole batches, by ranged GETs.

A fetch below the local log start finds its segment in `RemoteLogMetadataCache`, then:

1. the segment's offset index (one GET, cached) gives the last indexed batch at or before the
   offset and its byte position - Kafka's sparse index, so at most `index.interval.bytes` of
   batches lie between it and the target;
2. the segment's bytes from there are read in aligned chunks (`chunk_bytes`, ranged GETs,
   cached), walking batch headers only - records are never decoded - to the first batch whose
   last offset reaches the fetch offset;
3. whole batches from that one are returned up to `max_bytes` (at least one whole batch, as
   a local read gives a consumer whose first batch is bigger than its limit).

`aborted_transactions` answers read_committed fetches from the copied transaction index;
`offset_for_timestamp` answers ListOffsets by timestamp from the copied time index (one GET,
cached) and a walk of batch headers from there, decoding the records of one batch only.

Why a bounded cache: a consumer catching up reads a segment front to back in many fetches,
each of which would otherwise GET its index and re-read the chunk the previous one ended in.
Entries are evicted least-recently-used past `cache_bytes`. Thread-safe: the broker serves
remote fetches from several worker threads with one reader; GETs run outside the lock.
"""

from __future__ import annotations

import collections
import dataclasses
import struct
import threading
import uuid
from bisect import bisect_right
from collections.abc import Callable

from kafkapy.protocol.errors import CorruptRecordError, ProtocolError
from kafkapy.protocol.records import BatchHeader, decode_records, parse_batch_header
from kafkapy.storage.remote.layout import SegmentObject, segment_object_key
from kafkapy.storage.remote.metadata import RemoteLogSegmentMetadata
from kafkapy.storage.remote.object_store import ObjectNotFoundError, ObjectStore
from kafkapy.storage.txn_index import AbortedTxnEntry

__all__ = ["RemoteLogReader", "RemoteReadResult"]

_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position (Kafka's .index layout)
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset (Kafka's .timeindex layout)
_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, LSO (.txnindex)
_BATCH_PREFIX = 12  # base offset i64 + batch length i32: the batch is 12 + length bytes
_HEADER = 61


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteReadResult:
    """Whole batches starting with the one holding the fetch offset (empty: none there)."""

    records: bytes
    next_offset: int  # the offset after the last batch returned


class _LruBytes:
    """A byte-bounded LRU map of immutable values (chunks and parsed indexes)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._items: collections.OrderedDict[object, tuple[object, int]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_load(self, key: object, load: Callable[[], tuple[object, int]]) -> object:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return found[0]
            self.misses += 1
        value, size = load()  # outside the lock: a GET may take seconds
        with self._lock:
            if key not in self._items and size <= self.capacity:
                self._items[key] = (value, size)
                self.size += size
                while self.size > self.capacity:
                    _, (_, evicted) = self._items.popitem(last=False)
                    self.size -= evicted
        return value


class RemoteLogReader:
    """Reads copied segments back (module docstring)."""

    def __init__(self, store: ObjectStore, *, chunk_bytes: int = 4 << 20,
                 cache_bytes: int = 64 << 20) -> None:
        self.store = store
        self.chunk_bytes = chunk_bytes
        self.cache = _LruBytes(cache_bytes)

    def _key(self, segment: RemoteLogSegmentMetadata, kind: SegmentObject) -> str:
        return segment_object_key(segment.segment_id, segment.start_offset, kind)

    def _index(self, segment: RemoteLogSegmentMetadata) -> tuple[list[int], list[int]]:
        def load() -> tuple[object, int]:
            data = self.store.get(self._key(segment, SegmentObject.OFFSET_INDEX))
            offsets: list[int] = []
            positions: list[int] = []
            for rel, pos in _INDEX_ENTRY.iter_unpack(data[: len(data) - len(data) % 8]):
                if offsets and (rel <= offsets[-1] - segment.start_offset or pos < positions[-1]):
                    break  # a preallocated or damaged tail: the entries before it still hold
                offsets.append(segment.start_offset + rel)
                positions.append(pos)
            return (offsets, positions), len(data) + 64

        found = self.cache.get_or_load(("index", segment.segment_id.id), load)
        return found  # type: ignore[return-value]

    def _chunk(self, segment_id: uuid.UUID, key: str, number: int) -> bytes:
        start = number * self.chunk_bytes

        def load() -> tuple[object, int]:
            data = self.store.get(key, start, start + self.chunk_bytes)
            return data, len(data) + 64

        return self.cache.get_or_load(("chunk", segment_id, number), load)  # type: ignore[return-value]

    def _read_range(self, segment: RemoteLogSegmentMetadata, start: int, end: int) -> bytes:
        """Bytes [start, end) of the segment object (cut at its size), through the chunk cache."""
        end = min(end, segment.segment_size_in_bytes)
        key = self._key(segment, SegmentObject.SEGMENT)
        parts = []
        for number in range(start // self.chunk_bytes, (end - 1) // self.chunk_bytes + 1 if end > start else 0):
            chunk = self._chunk(segment.segment_id.id, key, number)
            base = number * self.chunk_bytes
            parts.append(chunk[max(start - base, 0): end - base])
        return b"".join(parts)

    def read(self, segment: RemoteLogSegmentMetadata, offset: int, max_bytes: int) -> RemoteReadResult:
        """Whole batches from the one holding `offset` (module docstring, steps 1-3).

        Raises `ObjectStoreError` (retriable or not) from the store, `CorruptRecordError` if
        the object is not what the metadata says was copied."""
        offsets, positions = self._index(segment)
        i = bisect_right(offsets, offset) - 1
        position = positions[i] if i >= 0 else 0
        size = segment.segment_size_in_bytes
        while position < size:  # step 2: the first batch reaching `offset`
            header = parse_batch_header(self._read_range(segment, position, position + _HEADER))
            length = _BATCH_PREFIX + header.batch_length
            if header.base_offset + header.last_offset_delta >= offset:
                break
            position += length
        else:
            return RemoteReadResult(b"", segment.end_offset + 1)
        first = position
        end, next_offset = position, offset
        while end < size:  # step 3: whole batches up to max_bytes, at least one
            header = parse_batch_header(self._read_range(segment, end, end + _HEADER))
            length = _BATCH_PREFIX + header.batch_length
            if end > first and end + length - first > max_bytes:
                break
            end += length
            next_offset = header.base_offset + header.last_offset_delta + 1
        data = self._read_range(segment, first, end)
        if len(data) != end - first:
            raise CorruptRecordError(f"remote segment {segment.segment_id.id} is shorter than its metadata")
        return RemoteReadResult(data, next_offset)

    def aborted_transactions(
        self, segment: RemoteLogSegmentMetadata, start: int, end: int,
    ) -> list[AbortedTxnEntry]:
        """Aborted transactions in the segment whose range meets [start, end)."""
        if segment.txn_index_empty:
            return []

        def load() -> tuple[object, int]:
            data = self.store.get(self._key(segment, SegmentObject.TRANSACTION_INDEX))
            entries = [
                AbortedTxnEntry(last_offset=last, producer_id=pid, first_offset=first,
                                last_stable_offset=lso)
                for _, pid, first, last, lso in _TXN_ENTRY.iter_unpack(
                    data[: len(data) - len(data) % _TXN_ENTRY.size])]
            return entries, len(data) + 64

        entries: list[AbortedTxnEntry] = self.cache.get_or_load(  # type: ignore[assignment]
            ("txn", segment.segment_id.id), load)
        return [e for e in entries if e.last_offset >= start and e.first_offset < end]

    def segment_object(self, segment: RemoteLogSegmentMetadata, kind: SegmentObject) -> bytes | None:
        """One whole object of a copied segment, uncached (a follower rebuilding its state
        reads the producer snapshot and leader-epoch checkpoint once); None when it was not
        copied (a log without a producer snapshot)."""
        try:
            return self.store.get(self._key(segment, kind))
        except ObjectNotFoundError:
            return None

    def _time_index(self, segment: RemoteLogSegmentMetadata) -> tuple[list[int], list[int]]:
        """(timestamps, offsets) of the segment's time index, cut at its first disorder."""
        def load() -> tuple[object, int]:
            data = self.store.get(self._key(segment, SegmentObject.TIME_INDEX))
            stamps: list[int] = []
            offsets: list[int] = []
            for ts, rel in _TIME_ENTRY.iter_unpack(data[: len(data) - len(data) % _TIME_ENTRY.size]):
                if stamps and (ts < stamps[-1] or segment.start_offset + rel < offsets[-1]):
                    break  # a preallocated or damaged tail
                stamps.append(ts)
                offsets.append(segment.start_offset + rel)
            return (stamps, offsets), len(data) + 64

        found = self.cache.get_or_load(("timeindex", segment.segment_id.id), load)
        return found  # type: ignore[return-value]

    def offset_for_timestamp(
        self, segment: RemoteLogSegmentMetadata, timestamp: int, start_offset: int,
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the segment's first record at or after `start_offset` whose
        timestamp is >= `timestamp` (ListOffsets over the remote tier), or None.

        Kafka's lookup: the time index's last entry below `timestamp` gives an offset every
        earlier record lies below; the offset index gives its position; batch headers are
        walked from there to the first batch whose max timestamp reaches `timestamp`."""
        stamps, offsets = self._time_index(segment)
        i = bisect_right(stamps, timestamp - 1) - 1
        from_offset = max(offsets[i] if i >= 0 else segment.start_offset, start_offset)
        index_offsets, positions = self._index(segment)
        j = bisect_right(index_offsets, from_offset) - 1
        position = positions[j] if j >= 0 else 0
        size = segment.segment_size_in_bytes
        while position < size:
            header = parse_batch_header(self._read_range(segment, position, position + _HEADER))
            length = _BATCH_PREFIX + header.batch_length
            if header.base_offset + header.last_offset_delta >= start_offset and header.max_timestamp >= timestamp:
                found = _first_record_at(self._read_range(segment, position, position + length), header,
                                         timestamp, start_offset)
                if found is not None:
                    return found
            position += length
        return None


def _first_record_at(data: bytes, header: BatchHeader, timestamp: int, start_offset: int) -> tuple[int, int] | None:
    """The first record of one batch at or after `start_offset` with a timestamp >= `timestamp`."""
    if header.timestamp_type == 1:  # LogAppendTime: every record carries the max timestamp
        return max(header.base_offset, start_offset), header.max_timestamp
    try:
        records = decode_records(data, 0, header)
    except ProtocolError:
        return None
    for record in records:
        offset = header.base_offset + record.offset_delta
        ts = header.base_timestamp + record.timestamp_delta
        if ts >= timestamp and offset >= start_offset:
            return offset, ts
    return None
