"""Read-side queries and transaction files of `PartitionLog`, kept apart to keep log.py small.

`LogQueries` is a mixin: it only reads the log's segments and offsets under the log's lock
(ListOffsets by timestamp / max timestamp) or keeps the aborted-transaction index and producer
snapshots in step with the segments (`txn_index.py` holds the file formats).
"""

from __future__ import annotations

import threading
from pathlib import Path

from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.records import BatchHeader, decode_records
from kafkapy.storage.errors import KafkaStorageError
from kafkapy.storage.local_log import LocalLog
from kafkapy.storage.log_segments import LogSegments
from kafkapy.storage.txn_index import (
    AbortedTxnEntry,
    delete_snapshots,
    read_snapshot,
    write_snapshot,
)

__all__ = ["LogQueries"]


class LogQueries:
    """Mixin for `PartitionLog` (which provides these attributes)."""

    directory: Path
    _lock: threading.RLock
    _local: LocalLog
    _segments: LogSegments
    _log_start_offset: int

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp` (ListOffsets),
        or None when every record is older. Decodes records of one batch only."""
        with self._lock:
            for seg in self._segments.with_timestamp_at_least(timestamp):
                seg.ensure_indexes()
                hint = seg.time_index.lookup_before(timestamp)
                start_offset = max(hint if hint is not None else seg.base_offset,
                                   self._log_start_offset)
                hit = seg.find(start_offset)
                if hit is None:
                    continue
                for _, header, data in seg.batches(hit[0], with_data=True):
                    if header.last_offset < self._log_start_offset:
                        continue
                    if header.max_timestamp < timestamp:
                        continue
                    assert data is not None
                    found = self._first_record_at(data, header, timestamp)
                    if found is not None:
                        return found
            return None

    def max_timestamp_offset(self, limit: int | None = None) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp among
        batches below `limit` (ListOffsets MAX_TIMESTAMP, KIP-734), or None when empty.

        Sealed segments answer from their time index; only the segment holding the winner
        and one straddling `limit` are scanned.
        """
        with self._lock:
            leo = self._local.log_end_offset
            limit = leo if limit is None else min(limit, leo)
            segments = self._segments
            best_ts, best = -1, -1
            for i, seg in enumerate(segments):
                if seg.base_offset >= limit:
                    break
                if seg.size == 0:
                    continue
                seg_end = segments.end_offset(i, leo)
                if seg_end <= limit:
                    ts = seg.largest_timestamp()
                else:
                    ts = max((h.max_timestamp for _, h, _ in seg.batches()
                              if h.base_offset < limit), default=-1)
                if ts > best_ts:
                    best_ts, best = ts, i
            if best < 0:
                return None
            for _, header, data in segments.segments[best].batches(with_data=True):
                if header.base_offset >= limit:
                    break
                if header.max_timestamp == best_ts and header.last_offset >= self._log_start_offset:
                    assert data is not None
                    return self._first_record_at(data, header, best_ts)
            return None

    def _first_record_at(
        self, data: memoryview, header: BatchHeader, timestamp: int
    ) -> tuple[int, int] | None:
        if header.timestamp_type == 1:  # LogAppendTime: every record carries max_timestamp
            return max(header.base_offset, self._log_start_offset), header.max_timestamp
        try:
            records = decode_records(data, 0, header)
        except ProtocolError:
            return None
        for record in records:
            offset = header.base_offset + record.offset_delta
            ts = header.base_timestamp + record.timestamp_delta
            if ts >= timestamp and offset >= self._log_start_offset:
                return offset, ts
        return None

    # --- transactions and producer state (file formats in txn_index.py) ---------------------
    def append_aborted_txn(self, producer_id: int, first_offset: int, last_offset: int,
                           last_stable_offset: int) -> None:
        """Record an aborted transaction whose abort marker was appended at `last_offset`."""
        with self._lock:
            seg = self._segments.segments[self._segments.floor_index(last_offset)]
            entry = AbortedTxnEntry(last_offset, producer_id, first_offset, last_stable_offset)
            try:
                seg.txn_index.append(entry)
            except OSError as exc:
                raise KafkaStorageError(f"cannot write the transaction index: {exc}") from exc

    def restore_aborted_txn(self, producer_id: int, first_offset: int, last_offset: int,
                            last_stable_offset: int) -> bool:
        """`append_aborted_txn` for a rebuild from the log (producer-state replay at start):
        adds the entry only if the index lacks it, wherever it belongs; True if it was missing."""
        with self._lock:
            seg = self._segments.segments[self._segments.floor_index(last_offset)]
            entry = AbortedTxnEntry(last_offset, producer_id, first_offset, last_stable_offset)
            try:
                return seg.txn_index.restore(entry)
            except OSError as exc:
                raise KafkaStorageError(f"cannot write the transaction index: {exc}") from exc

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxnEntry]:
        """Aborted transactions overlapping offsets [start, end) (read_committed fetches)."""
        with self._lock:
            out: list[AbortedTxnEntry] = []
            i = self._segments.floor_index(start)
            for seg in self._segments.segments[i:]:
                out += seg.txn_index.overlapping(start, end)
                if any(e.last_stable_offset > end for e in seg.txn_index.entries):
                    break  # later markers belong to transactions that began after `end`
            return out

    def write_producer_snapshot(self, offset: int, data: bytes, *, fsync: bool = True) -> None:
        """Keep the producer state (opaque bytes) as of `offset`. Blocking: fsyncs unless
        `fsync=False` (a snapshot at segment roll, written on the event loop: a power loss may
        leave it torn, which its CRC reveals, and the reader falls back to an older one)."""
        write_snapshot(self.directory, offset, data, fsync=fsync)

    def read_producer_snapshot(self, at_or_below: int) -> tuple[int, bytes] | None:
        """Newest producer snapshot at or below `at_or_below`, as (offset, bytes)."""
        return read_snapshot(self.directory, at_or_below)

    def delete_producer_snapshots(self, *, below: int | None = None,
                                  above: int | None = None) -> int:
        return delete_snapshots(self.directory, below=below, above=above)
