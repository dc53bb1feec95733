"""One segment of a partition log: `<base offset>.log` plus its `.index` and `.timeindex`.

The `.log` file holds record batches exactly as they go on the wire (magic v2, offsets
assigned), back to back, so a fetch can hand a byte range straight to `os.sendfile`.

Why positional I/O (`os.pwrite`/`os.pread`) on one fd per segment: the appender, readers and
the flusher share the fd without a shared file position, and the fd can outlive the segment's
place in the log (see `PartitionLog` on deletion). The fd is opened lazily, so opening thousands
of partitions costs no file descriptors until a segment is read or written.

Not thread-safe on its own: the owning `PartitionLog` serialises every mutating call.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from kafkapy.protocol.errors import CorruptRecordError, InvalidRecordError, ProtocolError
from kafkapy.protocol.records import BatchHeader, parse_batch_header, validate_batch
from kafkapy.storage.errors import KafkaStorageError, RecordTooLargeError
from kafkapy.storage.index import OffsetIndex, TimeIndex
from kafkapy.storage.txn_index import TransactionIndex

__all__ = ["HEADER_SIZE", "LogSegment", "parse_append_input", "segment_name"]

log = logging.getLogger(__name__)

HEADER_SIZE = 61
_CHUNK = 1 << 20  # scans that need the batch bytes (recovery, cleaning)
# Scans that only need headers (lookups after the index's binary search) read little at a
# time: the target is usually within index.interval.bytes, and a large batch is jumped over.
_HEADER_CHUNK = 16 << 10
# Relative offsets in the .index are i32: roll before a segment would span more offsets.
MAX_RELATIVE_OFFSET = (1 << 31) - 1


def segment_name(base_offset: int) -> str:
    """Kafka's 20-digit zero-padded file stem, so names sort in offset order."""
    return f"{base_offset:020d}"


def parse_append_input(
    data: bytearray | memoryview, max_message_bytes: int, *, allow_compacted: bool = False
) -> list[tuple[int, BatchHeader]]:
    """Frame and validate every batch (CRC, counts, size) of an append before any byte is
    written: (position, header) per batch, or CorruptRecordError / InvalidRecordError /
    RecordTooLargeError for the first bad one."""
    if not data:
        raise InvalidRecordError("no record batches to append")
    headers: list[tuple[int, BatchHeader]] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER_SIZE:
            raise CorruptRecordError(f"{len(data) - pos} trailing bytes are not a batch")
        header = parse_batch_header(data, pos)
        size = header.size
        if size < HEADER_SIZE or pos + size > len(data):
            raise CorruptRecordError(f"batch at byte {pos} claims {size} bytes")
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        validate_batch(data, pos, header, allow_compacted=allow_compacted)
        headers.append((pos, header))
        pos += size
    return headers


def _write_all(fd: int, data: memoryview, position: int) -> None:
    """pwrite until done; indirection point for fault-injection tests (full disk).

    The first call usually writes everything: checked before any slicing, since with 1,000
    partitions per produce request this runs 1,000 times per request."""
    written = os.pwrite(fd, data, position)
    if written == len(data):
        return
    if written <= 0:
        raise OSError(errno.EIO, "short write")
    data = data[written:]
    position += written
    while data:
        written = os.pwrite(fd, data, position)
        if written <= 0:
            raise OSError(errno.EIO, "short write")
        data = data[written:]
        position += written


class LogSegment:
    """A contiguous run of batches starting at `base_offset`."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        stem = segment_name(base_offset)
        self.log_path = directory / f"{stem}.log"
        self.index = OffsetIndex(directory / f"{stem}.index", base_offset)
        self.time_index = TimeIndex(directory / f"{stem}.timeindex", base_offset)
        self.txn_index = TransactionIndex(directory / f"{stem}.txnindex")
        self.index_interval_bytes = index_interval_bytes
        self.size = 0
        # Known for the active segment (and after a scan); None until needed otherwise.
        self._next_offset: int | None = None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        self.created_ms: int | None = None
        self.dirty = False  # bytes written since the last fsync
        self.written_back = 0  # file position up to which writeback was started (pacing)
        self._bytes_since_index = 0
        self._tail_end = 0
        self._fd: int | None = None
        # Set by recover(): (leader epoch, first offset) at each epoch change, in order.
        self.recovered_epochs: list[tuple[int, int]] = []

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size})"

    # --- lifecycle ------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_interval_bytes: int,
               now_ms: int) -> LogSegment:
        seg = cls(directory, base_offset, index_interval_bytes=index_interval_bytes)
        seg._fd = os.open(seg.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        for idx in (seg.index, seg.time_index):
            idx.create_empty()  # Kafka's layout: every segment has both files from the start
        seg.txn_index.rewrite([])
        seg._next_offset = base_offset
        seg.created_ms = now_ms
        return seg

    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR)
        return self._fd

    @property
    def is_open(self) -> bool:
        """The fd is open (every segment written since the log was opened has one)."""
        return self._fd is not None

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def detach_fd(self) -> int | None:
        """Hand the open fd to the caller (who closes it later); the segment forgets it."""
        fd, self._fd = self._fd, None
        return fd

    def unlink(self) -> None:
        """Remove the segment's files (the fd, if any, stays usable until closed)."""
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # --- scanning -------------------------------------------------------------------------
    def batches(self, start: int = 0, end: int | None = None, *, with_data: bool = False
                ) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        """Yield (position, header, bytes-or-None) for each complete batch in [start, end).

        Stops silently at a torn tail; raises `ProtocolError` at a header that is not a v2
        batch. Reads in chunks so a scan costs one syscall per chunk, not per batch.
        """
        limit = self.size if end is None else end
        fd = self.fd
        pos = start
        chunk = _CHUNK if with_data else _HEADER_CHUNK
        while pos + HEADER_SIZE <= limit:
            buf = os.pread(fd, min(chunk, limit - pos), pos)
            off = 0
            while off + HEADER_SIZE <= len(buf):
                header = parse_batch_header(buf, off)
                size = header.size
                if size < HEADER_SIZE:
                    raise ProtocolError(f"batch length {header.batch_length} is too small")
                if off + size > len(buf):
                    if off == 0:
                        if pos + size > limit:
                            return
                        data = os.pread(fd, size, pos) if with_data else None
                        if data is not None and len(data) < size:
                            return
                        yield pos, header, memoryview(data) if data is not None else None
                        off = size
                    break
                yield pos + off, header, memoryview(buf)[off : off + size] if with_data else None
                off += size
            if off == 0:
                return
            pos += off

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, or None."""
        self.ensure_indexes()
        _, start = self.index.lookup(offset)
        for pos, header, _ in self.batches(start):
            if header.last_offset >= offset:
                return pos, header
        return None

    def batch_boundary_at_or_before(self, position: int, start: int) -> int:
        """End of the last whole batch that ends at or before `position` (and after `start`).

        Used to trim a read to whole batches: binary search in the index, then a short scan.
        """
        self.ensure_indexes()
        _, pos = self.index.lookup_position(position)
        pos = max(pos, start)
        end = pos
        for bpos, header, _ in self.batches(pos):
            if bpos + header.size > position:
                break
            end = bpos + header.size
        return end

    @property
    def next_offset(self) -> int:
        """Offset after the last batch (scans from the last index entry when not known)."""
        if self._next_offset is None:
            self.ensure_indexes()
            nxt = self.base_offset
            start = self.index.values[-1] if len(self.index) else 0
            for _, header, _ in self.batches(start):
                nxt = header.last_offset + 1
            self._next_offset = nxt
        return self._next_offset

    def largest_timestamp(self) -> int:
        """Max batch timestamp in the segment (time index when sealed, else a scan)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        self.ensure_indexes()
        latest = self.time_index.max_timestamp
        if latest is not None:
            self.max_timestamp, self.offset_of_max_timestamp = latest
            return latest[0]
        for _, header, _ in self.batches():
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        return self.max_timestamp

    def ensure_indexes(self) -> None:
        """Load both index files on first use; rebuild them from the log if they look wrong.

        Index files are not fsynced, so after a crash they may be short (harmless: a longer
        scan) or hold garbage; the checks - monotonic entries, and the last offset entry
        pointing at a batch header with that base offset - catch the latter.
        """
        if self.index.loaded and self.time_index.loaded:
            return
        # A missing file is an empty index where no entry could exist yet (the first entry
        # comes after index.interval.bytes of batches) and for the time index always (its
        # users fall back to a scan).
        index_ok = self.index.load() or (
            self.index.missing and self.size <= self.index_interval_bytes + HEADER_SIZE)
        time_ok = self.time_index.load() or self.time_index.missing
        ok = index_ok and time_ok
        if ok and len(self.index):
            key, pos = self.index.keys[-1], self.index.values[-1]
            ok = pos + HEADER_SIZE <= self.size
            if ok:
                try:
                    ok = parse_batch_header(os.pread(self.fd, HEADER_SIZE, pos)).base_offset == key
                except ProtocolError:
                    ok = False
        if ok and len(self.time_index):
            ok = self.time_index.values[0] >= self.base_offset
        if not ok:
            log.warning("%s: rebuilding damaged index files", self.log_path.name)
            self._rebuild_indexes()

    def _rebuild_indexes(self) -> None:
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        for pos, header, _ in self.batches(0):
            self._index_batch(pos, header)
        self.seal()
        self.index.rewrite()
        self.time_index.rewrite()

    def load_state(self, size: int) -> None:
        """Adopt an on-disk segment known to be good: trust its size; indexes load lazily."""
        self.size = size
        self.written_back = size  # on disk already, or the kernel's to write back

    # --- writing --------------------------------------------------------------------------
    def append(self, data: memoryview, headers: list[tuple[int, BatchHeader]]) -> None:
        """Write validated, offset-assigned batches at the end and index them.

        On any OS error the file is cut back to its previous size, so a failed append never
        leaves a partial batch behind; if even that fails the error says the log is broken.
        """
        position = self.size
        try:
            _write_all(self.fd, data, position)
        except OSError as exc:
            try:
                os.ftruncate(self.fd, position)
            except OSError as exc2:
                raise KafkaStorageError(
                    f"append to {self.log_path} failed ({exc}) and cutting the partial write "
                    f"failed too ({exc2})"
                ) from exc
            raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc
        for rel, header in headers:
            self._index_batch(position + rel, header)
        self.size = position + len(data)
        self._next_offset = headers[-1][1].last_offset + 1
        self.dirty = True

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.ensure_indexes()
            self.index.append(header.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size

    def seal(self) -> None:
        """The segment stops being active (roll) or the log closes cleanly: record its max
        timestamp in the time index, as Kafka does in both cases, so a data dir after a clean
        shutdown holds the active segment's last time entry too."""
        self.ensure_indexes()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self, *, fsync: bool) -> None:
        """Write pending index entries; fsync the log and indexes when asked."""
        if self.index.loaded:
            self.index.flush(fsync=fsync)
        if self.time_index.loaded:
            self.time_index.flush(fsync=fsync)
        if fsync and self.dirty:
            os.fsync(self.fd)
        if fsync:
            self.dirty = False

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns bytes removed."""
        found = self.find(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        self.written_back = min(self.written_back, position)  # new bytes past the cut
        self.index.truncate_to_position(position)
        self.ensure_indexes()
        self.time_index.truncate_to_offset(found[1].base_offset)
        self.txn_index.truncate_to(found[1].base_offset)
        self._next_offset = None
        self._rescan_tail_state()
        return removed

    def _rescan_tail_state(self) -> None:
        """Recompute max timestamp and index spacing after the tail changed."""
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        start = self.index.values[-1] if len(self.index) else 0
        if self.time_index.max_timestamp is not None:
            self.max_timestamp, self.offset_of_max_timestamp = self.time_index.max_timestamp
        nxt = self.base_offset
        last_end = start
        for pos, header, _ in self.batches(start):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            nxt = header.last_offset + 1
            last_end = pos + header.size
        if start == 0 and self.size:
            first = next(self.batches(0), None)
            if first is not None:
                self.first_batch_timestamp = first[1].max_timestamp
        self._bytes_since_index = last_end - start
        self._tail_end = last_end
        if self._next_offset is None:
            self._next_offset = nxt if self.size else self.base_offset

    def open_as_active(self) -> bool:
        """Prepare a reopened last segment for appends (no full scan: index + short tail).

        False when the file does not end on a whole batch (the caller must recover it).
        """
        try:
            self.ensure_indexes()
            self._rescan_tail_state()
            if self.size and self.first_batch_timestamp is None:
                first = next(self.batches(0), None)
                self.first_batch_timestamp = first[1].max_timestamp if first else None
        except ProtocolError:
            return False
        return self._tail_end == self.size

    # --- recovery -------------------------------------------------------------------------
    def recover(self, expected_start: int, max_batch_bytes: int) -> tuple[int, str | None]:
        """Validate every batch, rebuild both indexes, cut at the first bad or torn batch.

        Returns (bytes truncated, reason or None). `expected_start` is the lowest offset a
        batch here may have (offsets must increase across batches).
        """
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self._bytes_since_index = 0
        file_size = os.fstat(self.fd).st_size
        self.size = file_size
        self.written_back = self.size
        valid_end = 0
        next_offset = max(self.base_offset, expected_start)
        reason: str | None = None
        self.recovered_epochs = []
        try:
            for pos, header, data in self.batches(0, file_size, with_data=True):
                assert data is not None
                if header.base_offset < next_offset or header.size > max_batch_bytes:
                    reason = f"batch at position {pos} has offset {header.base_offset} " \
                             f"(expected >= {next_offset}) or size {header.size}"
                    break
                try:
                    validate_batch(data, 0, header, allow_compacted=True)
                except ProtocolError as exc:
                    reason = f"batch at position {pos}: {exc}"
                    break
                self._index_batch(pos, header)
                epoch = header.partition_leader_epoch
                if not self.recovered_epochs or self.recovered_epochs[-1][0] != epoch:
                    self.recovered_epochs.append((epoch, header.base_offset))
                next_offset = header.last_offset + 1
                valid_end = pos + header.size
        except ProtocolError as exc:
            reason = f"bad batch header after position {valid_end}: {exc}"
        if reason is None and valid_end < file_size:
            reason = f"torn batch at position {valid_end}"
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        self.written_back = self.size
        self._next_offset = next_offset if valid_end else self.base_offset
        # Index files are written by the next flush (reset() made them start afresh): a
        # segment being recovered is rescanned after any crash before that anyway.
        return truncated, reason
