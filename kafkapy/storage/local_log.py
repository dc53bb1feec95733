"""`LocalLog`: the part of a partition's log that lives in its directory on this broker.

Kafka's `LocalLog`: the segments on local disk (`LogSegments`), the local log end offset and
recovery point, rolling, truncation, deletion of local segments (retention, DeleteRecords,
compaction swaps), flush and writeback, the parked fds of deleted segments, and the file side
of `offsets.checkpoint` (ordering and writing snapshots; what goes into them is the partition
log's business, as it holds the high watermark and the log start offset).

It knows nothing of high watermarks, transactions or leader epochs: `PartitionLog` decides
what is appended, read and removed, and this class does it on disk. With tiered storage
(KIP-405) a remote tier would sit beside it under the same `PartitionLog`, holding the
segments below this log's first one.

Locking: `PartitionLog` creates one re-entrant lock and shares it. The methods worker threads
and the cleaner call through the partition log (`flush`, `start_writeback`, `replace_segments`,
`reap_retired`) take it themselves, `flush` and `start_writeback` leaving it for their
system calls; every other method expects the caller to hold it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kafkapy.protocol.records import BatchHeader
from kafkapy.storage.checkpoint import (
    METADATA_FILE,
    OFFSETS_FILE,
    OffsetsCheckpoint,
    fsync_dir,
    fsync_file,
)
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import KafkaStorageError
from kafkapy.storage.log_segments import LogSegments
from kafkapy.storage.results import FileSlice
from kafkapy.storage.segment import MAX_RELATIVE_OFFSET, LogSegment
from kafkapy.storage.txn_index import delete_snapshots
from kafkapy.storage.writeback import PAGE_SIZE, WRITEBACK_SUPPORTED, start_writeback

__all__ = ["LocalLog", "now_ms"]

log = logging.getLogger(__name__)


class LocalLog:
    """The segments of one partition in `directory`; see the module docstring for locking."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        lock: threading.RLock,
        on_io_failure: Callable[[str], None],
        *,
        now_ms: int,
    ) -> None:
        self.directory = directory
        self.config = config
        self._lock = lock
        self._on_io_failure = on_io_failure
        self.segments = LogSegments(directory, index_interval_bytes=config.index_interval_bytes)
        self.log_end_offset = 0
        self.recovery_point = 0
        self.truncations = 0  # bumped by truncation so a racing flush does not advance the RP
        self.offline: str | None = None
        self.closed = False
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms
        self._last_writeback_ms = 0
        self._retired: list[tuple[float, int]] = []  # (monotonic time, fd) of deleted segments
        self.dir_dirty = True  # new segment files whose directory entries need an fsync
        self.meta_unsynced = False  # partition.metadata written but not fsynced
        # The file side of offsets.checkpoint: what the file holds (for a brand-new log
        # without the file: the state a missing file stands for), whether it exists and is
        # fsynced, and the order of snapshots so a write that lost a race never replaces a
        # newer file.
        self.checkpointed = OffsetsCheckpoint()
        self.checkpoint_on_disk = False
        self.checkpoint_synced = False
        self._checkpoint_file_lock = threading.Lock()
        self._checkpoint_version = 0
        self._checkpoint_written_version = 0

    # --- append ------------------------------------------------------------------------------
    def check_writable(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"log {self.directory.name} is closed")
        if self.offline is not None:
            raise KafkaStorageError(f"log {self.directory.name} is offline: {self.offline}")

    def append(self, data: bytearray | memoryview, headers: list[tuple[int, BatchHeader]],
               now_ms: int) -> None:
        """Write batches that already carry their offsets, rolling first when the active
        segment is full or old; moves the LEO. An I/O error takes the log offline unless the
        segment was left as it was."""
        active = self.segments.active
        last_offset = headers[-1][1].last_offset
        # segment.ms as in Kafka: the time between the segment's first batch and the incoming
        # one, by record timestamps (so replayed old data does not roll on every append);
        # wall-clock age of the segment when timestamps are missing.
        first_ts = active.first_batch_timestamp
        incoming_ts = (headers[0][1].max_timestamp if len(headers) == 1
                       else max(h.max_timestamp for _, h in headers))
        if first_ts is not None and first_ts >= 0 and incoming_ts >= 0:
            waited = incoming_ts - first_ts
        else:
            waited = now_ms - (active.created_ms if active.created_ms is not None else now_ms)
        if active.size and (
            active.size + len(data) > self.config.segment_bytes
            or waited >= self.config.segment_ms
            or last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        ):
            active = self.roll(headers[0][1].base_offset, now_ms)
        try:
            active.append(memoryview(data), headers)
        except KafkaStorageError as exc:
            if os.fstat(active.fd).st_size != active.size:
                self.offline = str(exc)
            self._on_io_failure(str(exc))
            raise
        except OSError as exc:
            self.offline = str(exc)
            self._on_io_failure(str(exc))
            raise KafkaStorageError(str(exc)) from exc
        self.log_end_offset = active.next_offset

    def roll(self, base_offset: int, now_ms: int) -> LogSegment:
        """Seal the active segment and start a new one at `base_offset` (the next offset)."""
        try:
            new = self.segments.roll(base_offset, now_ms)
        except OSError as exc:
            self._on_io_failure(f"cannot roll segment: {exc}")
            raise KafkaStorageError(f"cannot roll segment: {exc}") from exc
        self.dir_dirty = True
        return new

    # --- read --------------------------------------------------------------------------------
    def read_into(self, offset: int, max_bytes: int, limit: int, slices: list[FileSlice]) -> int:
        """Add the slice of whole batches from the batch holding `offset` (up to `max_bytes`,
        at least one batch, none at or past `limit`) to `slices`; returns the first batch's
        base offset, or -1 when there is none. Fills the caller's list so a Fetch builds one."""
        segments = self.segments
        found = segments.locate(offset, limit)
        if found is None:
            return -1
        i, pos, header = found
        seg = segments.segments[i]
        end_pos = seg.size
        seg_end = segments.bases[i + 1] if i + 1 < len(segments.bases) else self.log_end_offset
        if limit < seg_end:
            stop = seg.find(limit)
            end_pos = stop[0] if stop is not None else seg.size
        if end_pos <= pos:
            return -1
        want = pos + max(max_bytes, header.size)
        if want < end_pos:
            end_pos = max(seg.batch_boundary_at_or_before(want, pos), pos + header.size)
        slices.append(FileSlice(seg.fd, pos, end_pos - pos))
        return header.base_offset

    # --- deletion of local segments ----------------------------------------------------------
    def retire(self, i: int) -> None:
        """Take segment `i` out of the log: unlink now, close its fd after the delay."""
        seg = self.segments.pop(i)
        fd = seg.detach_fd()
        if fd is not None:
            self._retired.append((time.monotonic(), fd))
        seg.unlink()

    def delete_below(self, offset: int) -> int:
        """Delete the segments wholly below `offset` (never the active one) and the producer
        snapshots below the new first segment but the newest; returns how many went."""
        bases = self.segments.bases
        deleted = 0
        while len(bases) > 1 and bases[1] <= offset:
            self.retire(0)
            deleted += 1
        if deleted:
            delete_snapshots(self.directory, below=bases[0], keep_newest=True)
        return deleted

    def retention_breaches(self, now_ms: int, upper: int, *, limits: tuple[int, int] | None = None) -> int:
        """How many leading segments `retention.ms` / `retention.bytes` (policy `delete`) want
        gone. Only segments that end at or below `upper` count (the partition passes its high
        watermark: retention never removes data consumers cannot see yet), never the active
        one. Deciding apart from deleting lets the partition move its log start first.
        `limits`: (ms, bytes) instead of the config's (a tiered topic's local retention)."""
        cfg = self.config
        if not cfg.delete:
            return 0
        retention_ms, retention_bytes = limits or (cfg.retention_ms, cfg.retention_bytes)
        segs, bases = self.segments.segments, self.segments.bases
        n = 0
        if retention_ms >= 0:
            while (n + 1 < len(segs) and bases[n + 1] <= upper
                   and now_ms - segs[n].largest_timestamp() > retention_ms):
                n += 1
        if retention_bytes >= 0:
            excess = sum(s.size for s in segs[n:]) - retention_bytes
            while n + 1 < len(segs) and bases[n + 1] <= upper and excess - segs[n].size >= 0:
                excess -= segs[n].size
                n += 1
        return n

    def replace_segments(self, old: list[LogSegment], new: Iterable[LogSegment]) -> None:
        """Swap `old` (contiguous, not the active one) for `new` (the cleaner's output)."""
        with self._lock:
            for seg in old:
                fd = seg.detach_fd()
                if fd is not None:
                    self._retired.append((time.monotonic(), fd))
            self.segments.replace(old, new)

    def reap_retired(self, *, force: bool = False) -> None:
        """Close fds of deleted segments once `file.delete.delay.ms` has passed."""
        with self._lock:
            horizon = time.monotonic() - self.config.file_delete_delay_ms / 1000
            keep: list[tuple[float, int]] = []
            for when, fd in self._retired:
                if force or when <= horizon:
                    os.close(fd)
                else:
                    keep.append((when, fd))
            self._retired = keep

    # --- truncation --------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns the new end of the
        segments (a straddling batch goes whole, so it may be below `offset`). The caller
        finishes with `after_truncation` once it has settled its own offsets."""
        self.truncations += 1
        bases = self.segments.bases
        while len(bases) > 1 and bases[-1] >= offset:
            self.retire(len(bases) - 1)
        active = self.segments.active
        try:
            removed = active.truncate_to(offset)
        except OSError as exc:
            self.offline = str(exc)
            self._on_io_failure(f"truncation failed: {exc}")
            raise KafkaStorageError(f"truncation failed: {exc}") from exc
        log.info("%s: truncated to offset %d (%d bytes)", self.directory.name, offset, removed)
        return active.next_offset

    def truncate_fully(self, start_offset: int, now_ms: int) -> None:
        """Delete every segment and restart empty at `start_offset` (then `after_truncation`)."""
        self.truncations += 1
        while len(self.segments):
            self.retire(len(self.segments) - 1)
        self.segments.create(start_offset, now_ms)
        self.dir_dirty = True

    def after_truncation(self, log_end_offset: int) -> None:
        """Settle the LEO and recovery point after a truncation; producer snapshots above the
        new end describe batches that are gone."""
        delete_snapshots(self.directory, above=log_end_offset)
        self.log_end_offset = log_end_offset
        self.recovery_point = min(self.recovery_point, log_end_offset)

    # --- durability --------------------------------------------------------------------------
    def flush(self) -> bool:
        """For a worker thread: fsync the segments from the recovery point on (and the
        directory and `partition.metadata` when new), then advance the recovery point to the
        LEO seen at the start. False when the log is closed.

        The lock is not held during the fsyncs, and a flush with nothing new to sync costs no
        fsync at all. Index files are not fsynced: they are validated when loaded and rebuilt
        from the log if damaged.
        """
        with self._lock:
            if self.closed:
                return False
            generation, leo = self.truncations, self.log_end_offset
            start = self.segments.floor_index(self.recovery_point)
            segs = self.segments.segments[start:]
            for seg in segs:
                seg.flush(fsync=False)  # pending index entries into the page cache
            targets = [s for s in segs if s.dirty]
            fds = [seg.fd for seg in targets]
            self.unflushed_messages = 0
            dir_dirty, self.dir_dirty = self.dir_dirty, False
            meta_unsynced, self.meta_unsynced = self.meta_unsynced, False
        try:
            for fd in fds:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    # A segment retired and reaped meanwhile (file.delete.delay.ms = 0): its
                    # data left the log, nothing to sync.
                    if exc.errno != errno.EBADF:
                        raise
            if meta_unsynced:
                fsync_file(self.directory / METADATA_FILE)
            if dir_dirty:
                fsync_dir(self.directory)
        except OSError as exc:
            with self._lock:
                self.offline = f"fsync failed: {exc}"
            self._on_io_failure(f"fsync failed: {exc}")
            raise KafkaStorageError(f"flush of {self.directory.name} failed: {exc}") from exc
        with self._lock:
            for seg in targets:
                seg.dirty = False
            if generation == self.truncations:
                self.recovery_point = max(self.recovery_point, leo)
            self.last_flush_ms = now_ms()
        return True

    def write_unsynced(self) -> None:
        """Every segment's pending index entries into the page cache, no fsync."""
        for seg in self.segments:
            seg.flush(fsync=False)

    def start_writeback(self, now_ms: int, *, min_bytes: int, max_delay_ms: int) -> int:
        """For a worker thread: start the kernel's writeback of bytes appended since the last
        call (see `kafkapy.storage.writeback`) when at least `min_bytes` are waiting, or any
        are and the last start was `max_delay_ms` ago. Returns the bytes handed over.

        The lock only covers picking the ranges. The active segment's last partial page is
        left for later, so an append never writes into a page the disk may be reading.
        """
        ranges: list[tuple[int, int, int]] = []
        with self._lock:
            if self.closed or self.offline is not None or not WRITEBACK_SUPPORTED:
                return 0
            segs = self.segments.segments
            # The active segment, and the sealed ones before it back to the first that is
            # done (rolled segments are handed over from the oldest pending one on).
            first = len(segs) - 1
            while first > 0:
                seg = segs[first - 1]
                if seg.written_back >= seg.size or not seg.is_open:
                    break
                first -= 1
            active = segs[-1]
            pending = sum(seg.size - seg.written_back for seg in segs[first:]
                          if seg.is_open and seg.size > seg.written_back)
            if pending == 0 or (pending < min_bytes
                                and now_ms - self._last_writeback_ms < max_delay_ms):
                return 0
            for seg in segs[first:]:
                if not seg.is_open:
                    continue
                end = seg.size if seg is not active else seg.size - seg.size % PAGE_SIZE
                if end > seg.written_back:
                    ranges.append((seg.fd, seg.written_back, end - seg.written_back))
                    seg.written_back = end
            self._last_writeback_ms = now_ms
        for fd, position, length in ranges:
            start_writeback(fd, position, length)
        return sum(length for _, _, length in ranges)

    def needs_flush(self, now_ms: int) -> bool:
        """`flush.messages` or `flush.ms` says an fsync is due."""
        return self.unflushed_messages > 0 and (
            self.unflushed_messages >= self.config.flush_messages
            or now_ms - self.last_flush_ms >= self.config.flush_ms
        )

    # --- offsets.checkpoint, the file side ---------------------------------------------------
    def next_checkpoint_version(self) -> int:
        """Under the log's lock: the place of a new snapshot in the order of snapshots."""
        self._checkpoint_version += 1
        return self._checkpoint_version

    def write_checkpoint(self, version: int, state: OffsetsCheckpoint, *,
                         fsync: bool, even_if_closed: bool = False) -> bool:
        """Write a snapshot unless a newer one is already on disk; False when skipped.

        Callable without the log's lock (the periodic checkpoint does so): a rename stalls
        for 100+ ms while the kernel writes back a large file on the same disk, and the
        appends on the event loop must not wait for that. Writes are serialised by their
        own lock, taken after the log's lock where both are held (never the other way).
        """
        with self._checkpoint_file_lock:
            if version <= self._checkpoint_written_version:
                return False
            if self.closed and not even_if_closed:
                return False  # closed or deleted meanwhile: its directory may be gone
            state.write(self.directory, fsync=fsync)
            self._checkpoint_written_version = version
            self.checkpointed = state
            self.checkpoint_on_disk = True
            self.checkpoint_synced = fsync
        return True

    def sync_checkpoint(self) -> None:
        """fsync a checkpoint written unsynced since (e.g. a high watermark checkpoint): the
        same content, so this makes it durable without rewriting it."""
        with self._checkpoint_file_lock:
            if not self.checkpoint_synced and not self.closed:
                fsync_file(self.directory / OFFSETS_FILE)
                self.checkpoint_synced = True

    # --- end of life -------------------------------------------------------------------------
    def seal_active_for_close(self) -> None:
        """The active segment's last time index entry, as Kafka writes at close, when its
        indexes were written or read this run (otherwise they were never loaded)."""
        active = self.segments.active
        if active.index.loaded and active.time_index.loaded:
            with contextlib.suppress(KafkaStorageError, OSError):
                active.seal()

    def close(self) -> None:
        """Release every fd (the parked ones too); the log must not be used afterwards."""
        self.closed = True
        for seg in self.segments:
            seg.close()
        self.reap_retired(force=True)

    def delete_directory(self) -> None:
        """Close and remove the directory, never half way through a checkpoint write."""
        self.close()
        with self._checkpoint_file_lock:
            shutil.rmtree(self.directory, ignore_errors=True)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
