"""`PartitionLog`: one partition's segmented, durable, recoverable log.

Directory `<topic>-<partition>/` holds `<20-digit base offset>.log` segments with their
`.index` / `.timeindex` / `.txnindex`, `<offset>.snapshot` producer snapshots,
`offsets.checkpoint`, `partition.metadata` and `leader-epoch-checkpoint` (see `checkpoint.py`),
and transiently `.cleaned` files plus a `cleaner.swap` marker while the cleaner swaps segments
(see `cleaner.py`).

Offsets (Kafka's vocabulary): log start offset <= high watermark <= log end offset (LEO).
Only the caller moves the high watermark and the last stable offset (replication and
transactions decide them); the log clamps them into range and checkpoints them on flush.

Durability: `append` only writes into the page cache (a killed process loses nothing that was
acknowledged; a power loss may lose what was not flushed). `flush()` fsyncs and then moves the
recovery point; after an unclean stop only segments from the recovery point on are re-validated
(CRC of every batch), and the first torn or corrupt batch ends the log. Opening after a clean
shutdown reads the index tail of the active segment only. Opening, recovery and the offsets
checkpoint bookkeeping live in `recovery.py` (`LogRecovery`), the read-side queries and
transaction files in `queries.py` (`LogQueries`); both are mixins of `PartitionLog`.

Thread-safety contract
----------------------
- One re-entrant lock per log guards the segment list, offsets and indexes. `append` (called
  from the trio thread) holds it only to assign offsets and `pwrite` into the page cache; CRC
  validation of the incoming bytes happens before the lock is taken, and no fsync ever happens
  in `append`.
- `flush`, `delete_old_segments`, `truncate_*`, the cleaner and `close` may run in a worker
  thread. `flush` fsyncs *outside* the lock, so appends continue while the disk syncs.
  `offsets.checkpoint` is written outside it too (snapshot under the lock, write under a
  second lock that only serialises checkpoint files): behind a large writeback its rename
  took 144 ms, and the appends on the event loop waited that long for the lock.
- Readers get `FileSlice(fd, position, length)`. A segment leaving the log (retention,
  truncate-fully, compaction swap) is unlinked at once but its fd is *not* closed: it is parked
  and closed by a later maintenance call once `file.delete.delay.ms` (default 60 s, like
  Kafka's delayed delete) has passed, so a slice handed out before the deletion stays readable
  with `os.sendfile` for at least that long. Slices are therefore only valid for
  `file.delete.delay.ms`; consume them promptly. The one exception is follower truncation,
  which shortens the active file in place: a slice past the new end then reads short.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import shutil
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from kafkapy.protocol.errors import InvalidRecordError, ProtocolError
from kafkapy.protocol.records import (
    BatchHeader,
    set_max_timestamp,
)
from kafkapy.storage.checkpoint import (
    METADATA_FILE,
    OFFSETS_FILE,
    OffsetsCheckpoint,
    fsync_dir,
    fsync_file,
)
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import (
    InvalidLogConfigError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from kafkapy.storage.queries import LogQueries
from kafkapy.storage.recovery import LogRecovery
from kafkapy.storage.results import AppendResult, FileSlice, ReadResult
from kafkapy.storage.segment import (
    MAX_RELATIVE_OFFSET,
    LogSegment,
    parse_append_input,
)
from kafkapy.storage.txn_index import (
    delete_snapshots,
)
from kafkapy.storage.validator import RecordRules
from kafkapy.storage.writeback import PAGE_SIZE, WRITEBACK_SUPPORTED, start_writeback

__all__ = ["AppendResult", "FileSlice", "PartitionLog", "ReadResult"]

log = logging.getLogger(__name__)

HW_CHECKPOINT_INTERVAL_MS = 5000
# Record batch v2: baseOffset (int64) at byte 0 and partitionLeaderEpoch (int32) at byte 12 of a
# batch, both outside the CRC - what `append` stamps into the client's bytes.
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_AT = 12


class PartitionLog(LogRecovery, LogQueries):
    """A partition's log in `directory`; see the module docstring for the locking rules."""

    #: called with (log directory, reason) when a write, roll, fsync or truncation fails with an
    #: I/O error (Kafka's LogDirFailureChannel); the LogManager sets it on the logs it opens
    io_failure_listener: Callable[[Path, str], None] | None = None

    def __init__(
        self,
        directory: Path | str,
        config: LogConfig | None = None,
        *,
        clean_shutdown: bool = False,
        topic_id: uuid.UUID | None = None,
        now_ms: int | None = None,
        defaults: LogConfig | None = None,
    ) -> None:
        """Open (or create) the log; recover from the recovery point unless `clean_shutdown`.

        With `config=None` the log uses `defaults` overlaid with the topic-config overrides
        stored in its `partition.metadata` (how `LogManager` reopens logs).
        """
        self.directory = Path(directory)
        self.config = config if config is not None else LogConfig()
        self._rules = RecordRules(self.config)  # Kafka's record-level rules, per config
        self._lock = threading.RLock()
        self._retired: list[tuple[float, int]] = []  # (monotonic time, fd) of deleted segments
        self._generation = 0  # bumped by truncation so a racing flush does not advance the RP
        self._offline: str | None = None
        self._closed = False
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms if now_ms is not None else _now_ms()
        self._last_hw_checkpoint_ms = 0
        self._last_writeback_ms = 0
        self._dir_dirty = True  # new segment files whose directory entries need an fsync
        self._meta_unsynced = False
        self._epochs_unsynced = False
        # What `offsets.checkpoint` holds (for a brand-new log without the file: the state a
        # missing file stands for), whether the file exists and whether it is fsynced. Writes
        # are skipped while the state equals it: an idle log costs no file work (thousands of
        # partitions are checked every flush interval and rewritten at shutdown otherwise).
        self._checkpointed = OffsetsCheckpoint()
        self._checkpoint_on_disk = False
        self._checkpoint_synced = False
        self._checkpoint_file_lock = threading.Lock()
        self._checkpoint_version = 0
        self._checkpoint_written_version = 0
        self.directory.mkdir(parents=True, exist_ok=True)
        self._metadata = self._load_metadata(topic_id)
        if config is None and self._metadata.config_overrides:
            base = defaults if defaults is not None else LogConfig()
            try:
                self.config = LogConfig.from_topic_configs(self._metadata.config_overrides, base)
            except InvalidLogConfigError:
                log.warning("%s: ignoring unreadable config overrides", self.directory.name)
                self.config = base
        elif config is None and defaults is not None:
            self.config = defaults
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._open(clean_shutdown, self._last_flush_ms)

    # --- properties -----------------------------------------------------------------------
    @property
    def topic_id(self) -> uuid.UUID:
        return self._metadata.topic_id

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def truncations(self) -> int:
        """How many times the tail was cut (truncation, or a restart at a new offset): state
        derived from the log (producer state) that was read before a change is stale."""
        return self._generation

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set by the replication layer; clamped to [log start, LEO], checkpointed on flush."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._leo)
            if self._high_watermark < self._checkpointed.high_watermark:
                # rare (a leader change): keep "a crash never raises the HW" by writing now
                self._write_checkpoint(fsync=False)

    @property
    def last_stable_offset(self) -> int:
        """The transaction layer's LSO when set, else the high watermark (never above it)."""
        if self._last_stable is None:
            return self._high_watermark
        return min(self._last_stable, self._high_watermark)

    @last_stable_offset.setter
    def last_stable_offset(self, offset: int | None) -> None:
        self._last_stable = offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def offline(self) -> bool:
        return self._offline is not None

    def set_config(self, config: LogConfig, defaults: LogConfig | None = None) -> None:
        """Apply a new topic config (persisted as overrides of `defaults`)."""
        with self._lock:
            self.config = config
            for seg in self.segments:
                seg.index_interval_bytes = config.index_interval_bytes
            overrides = config.overrides(defaults if defaults is not None else LogConfig())
            if overrides != self._metadata.config_overrides:
                self._metadata.config_overrides = overrides
                # no fsync here (CreateTopics runs on the event loop): the next flush() syncs
                self._metadata.write(self.directory, fsync=False)
                self._meta_unsynced = True

    @property
    def config_overrides(self) -> dict[str, str]:
        return dict(self._metadata.config_overrides)

    # --- append ---------------------------------------------------------------------------
    def append(
        self,
        batches: bytes | bytearray | memoryview,
        *,
        now_ms: int,
        leader_epoch: int = 0,
        from_client: bool = True,
    ) -> AppendResult:
        """Validate, assign offsets (patching the bytes), write. Called on the trio thread.

        `from_client=False` is for batches the broker writes itself (transaction markers),
        which may be control batches; clients may not send those (INVALID_RECORD).
        A writable memoryview (the server's receive buffer of a produce request) is patched and
        written as it is, saving a copy of the batches; anything else is copied first.
        """
        data = batches if isinstance(batches, memoryview) and not batches.readonly else bytearray(batches)
        headers = parse_append_input(data, self.config.max_message_bytes)
        if from_client:
            rules = self._rules
            if rules.config is not self.config:
                rules = self._rules = RecordRules(self.config)
            for pos, header in headers:
                if header.is_control:
                    raise InvalidRecordError("clients may not produce control batches")
                rules.validate(data, pos, header, now_ms, self.directory.name)
        log_append_time = self.config.log_append_time
        with self._lock:
            self._check_writable()
            base = next_offset = self._leo
            messages = 0
            for pos, header in headers:
                # `parse_append_input` framed every batch: stamp without re-checking (the
                # protocol's setters would frame each batch again, twice per batch)
                _BASE_OFFSET.pack_into(data, pos, next_offset)
                _LEADER_EPOCH.pack_into(data, pos + _LEADER_EPOCH_AT, leader_epoch)
                if log_append_time:
                    set_max_timestamp(data, pos, now_ms, True)
                    header.max_timestamp = now_ms
                header.base_offset = next_offset
                header.partition_leader_epoch = leader_epoch
                next_offset = header.last_offset + 1
                messages += header.records_count
            self._write(data, headers, now_ms)
            if self.leader_epochs.assign(leader_epoch, base):
                self._write_epochs()
            self._unflushed_messages += messages
            return AppendResult(
                base_offset=base,
                last_offset=next_offset - 1,
                log_append_time_ms=now_ms if log_append_time else -1,
                log_start_offset=self._log_start_offset,
                batches=len(headers),
                flush_needed=self._unflushed_messages >= self.config.flush_messages,
            )

    def append_as_follower(
        self, batches: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> AppendResult:
        """Append batches that already carry offsets (replication); they must follow the LEO.

        One exception, as in Kafka: an empty log whose start offset falls inside the first
        batch (the leader's log start was moved into a batch by DeleteRecords, and the follower
        restarted its log there) restarts at that batch's base offset, keeping its log start.
        """
        # nothing is patched on this path, so the bytes are validated and written as they are
        data = batches if isinstance(batches, (bytearray, memoryview)) else memoryview(batches)
        headers = parse_append_input(data, self.config.max_message_bytes,
                                      allow_compacted=True)
        with self._lock:
            self._check_writable()
            first = headers[0][1]
            restart_at = None
            if self._leo == self._log_start_offset and first.base_offset < self._leo <= first.last_offset:
                restart_at = self._log_start_offset
                self.truncate_fully(first.base_offset)
            expected = self._leo
            for _, header in headers:
                if header.base_offset < expected:
                    raise InvalidRecordError(
                        f"batch offset {header.base_offset} is below the log end offset {expected}"
                    )
                expected = header.last_offset + 1
            self._write(data, headers, now_ms if now_ms is not None else _now_ms())
            changed = False
            for _, header in headers:
                changed |= self.leader_epochs.assign(
                    header.partition_leader_epoch, header.base_offset
                )
            if changed:
                self._write_epochs()
            if restart_at is not None:
                self._advance_log_start(restart_at)
            self._unflushed_messages += sum(h.records_count for _, h in headers)
            return AppendResult(
                base_offset=headers[0][1].base_offset,
                last_offset=expected - 1,
                log_append_time_ms=-1,
                log_start_offset=self._log_start_offset,
                batches=len(headers),
                flush_needed=self._unflushed_messages >= self.config.flush_messages,
            )

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.directory.name} is closed")
        if self._offline is not None:
            raise KafkaStorageError(f"log {self.directory.name} is offline: {self._offline}")

    def _write(self, data: bytearray | memoryview, headers: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        active = self.segments[-1]
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
            active = self._roll(headers[0][1].base_offset, now_ms)
        try:
            active.append(memoryview(data), headers)
        except KafkaStorageError as exc:
            if os.fstat(active.fd).st_size != active.size:
                self._offline = str(exc)
            self._io_failed(str(exc))
            raise
        except OSError as exc:
            self._offline = str(exc)
            self._io_failed(str(exc))
            raise KafkaStorageError(str(exc)) from exc
        self._leo = active.next_offset

    def _io_failed(self, reason: str) -> None:
        listener = self.io_failure_listener
        if listener is not None:
            listener(self.directory, reason)

    def _roll(self, base_offset: int, now_ms: int) -> LogSegment:
        """Seal the active segment and start a new one at `base_offset` (the next offset)."""
        old = self.segments[-1]
        old.seal()
        try:
            old.flush(fsync=False)
            new = LogSegment.create(self.directory, base_offset,
                                    index_interval_bytes=self.config.index_interval_bytes,
                                    now_ms=now_ms)
        except OSError as exc:
            self._io_failed(f"cannot roll segment: {exc}")
            raise KafkaStorageError(f"cannot roll segment: {exc}") from exc
        self.segments.append(new)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return new

    def roll(self, now_ms: int | None = None) -> None:
        """Force a new active segment (tests, and the cleaner wanting the tail cleanable)."""
        with self._lock:
            if self.segments[-1].size:
                self._roll(self._leo, now_ms if now_ms is not None else _now_ms())

    # --- read -----------------------------------------------------------------------------
    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"offset {offset} is outside [{self._log_start_offset}, {self._leo}]",
            log_start_offset=self._log_start_offset,
            log_end_offset=self._leo,
        )

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> ReadResult:
        """Whole batches from the batch holding `offset`, up to `max_bytes` (KIP-74: at least
        one batch even when larger). `max_offset` (exclusive, e.g. the high watermark) hides
        every batch whose last offset is at or past it (as in Kafka). Binary search in the index plus a short scan; no copies.

        Damage found in a segment below the recovery point (bit rot) raises KafkaStorageError.
        """
        with self._lock:
            if offset < self._log_start_offset or offset > self._leo:
                raise self._out_of_range(offset)
            try:
                return self._read(offset, max_bytes, max_offset)
            except (ProtocolError, OSError) as exc:
                raise KafkaStorageError(f"{self.directory.name}: cannot read at {offset}: {exc}"
                                        ) from exc

    def _read(self, offset: int, max_bytes: int, max_offset: int | None) -> ReadResult:
        """`read` under the lock."""
        limit = self._leo if max_offset is None else min(max_offset, self._leo)
        found = self._locate(offset, limit)
        slices: list[FileSlice] = []
        first = -1
        if found is not None:
            i, pos, header = found
            seg = self.segments[i]
            seg_end_offset = self._bases[i + 1] if i + 1 < len(self.segments) else self._leo
            end_pos = seg.size
            if limit < seg_end_offset:
                stop = seg.find(limit)
                end_pos = stop[0] if stop is not None else seg.size
            if end_pos > pos:
                want = pos + max(max_bytes, header.size)
                if want < end_pos:
                    end_pos = max(seg.batch_boundary_at_or_before(want, pos),
                                  pos + header.size)
                slices.append(FileSlice(seg.fd, pos, end_pos - pos))
                first = header.base_offset
        return ReadResult(
            slices=slices,
            first_offset=first,
            high_watermark=self._high_watermark,
            last_stable_offset=self.last_stable_offset,
            log_start_offset=self._log_start_offset,
            log_end_offset=self._leo,
        )

    def _locate(self, offset: int, limit: int) -> tuple[int, int, BatchHeader] | None:
        """(segment index, position, header) of the first batch with last offset >= `offset`
        and base offset < `limit`; segments may hold gaps (compaction) or be empty."""
        if offset >= limit:
            return None
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        while i < len(self.segments):
            hit = self.segments[i].find(offset)
            if hit is not None:
                pos, header = hit
                return (i, pos, header) if header.base_offset < limit else None
            i += 1
        return None

    def read_bytes(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Like `read`, returning the bytes (for replication, tests and the cleaner)."""
        with self._lock:
            result = self.read(offset, max_bytes, max_offset=max_offset)
            return b"".join(s.read() for s in result.slices)

    # --- offsets moved by the caller --------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset (not past the high watermark).

        Whole segments below it are deleted now; returns the new log start offset.
        """
        with self._lock:
            if offset > self._high_watermark or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: high watermark is "
                    f"{self._high_watermark}",
                    log_start_offset=self._log_start_offset,
                    log_end_offset=self._leo,
                )
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
            self._delete_segments_below_start()
            return self._log_start_offset

    def follow_log_start(self, offset: int) -> int:
        """Follower: move the log start up to the leader's (never down, never past the LEO);
        whole segments below it go as with DeleteRecords. Returns the log start offset."""
        with self._lock:
            offset = min(offset, self._leo)
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
                self._high_watermark = max(self._high_watermark, offset)
                self._delete_segments_below_start()
            return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        self.cleaner_offset = max(self.cleaner_offset, offset)
        if self.leader_epochs.truncate_from_start(offset):
            self._write_epochs()
        self._write_checkpoint(fsync=False)

    def _delete_segments_below_start(self) -> int:
        deleted = 0
        while len(self.segments) > 1 and self._bases[1] <= self._log_start_offset:
            self._retire(0)
            deleted += 1
        if deleted:
            delete_snapshots(self.directory, below=self._bases[0], keep_newest=True)
        return deleted

    def _retire(self, i: int) -> None:
        """Take segment `i` out of the log: unlink now, close its fd after the delay."""
        seg = self.segments.pop(i)
        self._bases.pop(i)
        fd = seg.detach_fd()
        if fd is not None:
            self._retired.append((time.monotonic(), fd))
        seg.unlink()

    def replace_segments(self, old: list[LogSegment], new: Iterable[LogSegment]) -> None:
        """Swap `old` (contiguous, not the active one) for `new` (the cleaner's output)."""
        with self._lock:
            i = self.segments.index(old[0])
            for seg in old:
                fd = seg.detach_fd()
                if fd is not None:
                    self._retired.append((time.monotonic(), fd))
            self.segments[i : i + len(old)] = list(new)
            self._bases = [s.base_offset for s in self.segments]

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

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: remove every batch whose last offset is >= `offset`.

        A batch straddling `offset` is removed whole, so the LEO may end below `offset`. At or
        below the log start offset nothing visible remains: the log restarts empty there (at
        `offset`, as Kafka's truncate-fully does).
        """
        with self._lock:
            if offset >= self._leo:
                return
            if offset <= self._log_start_offset:
                self.truncate_fully(offset)
                return
            self._generation += 1
            while len(self.segments) > 1 and self._bases[-1] >= offset:
                self._retire(len(self.segments) - 1)
            active = self.segments[-1]
            try:
                removed = active.truncate_to(offset)
            except OSError as exc:
                self._offline = str(exc)
                self._io_failed(f"truncation failed: {exc}")
                raise KafkaStorageError(f"truncation failed: {exc}") from exc
            log.info("%s: truncated to offset %d (%d bytes)", self.directory.name, offset, removed)
            if active.next_offset < self._log_start_offset:
                # the removed batch straddled the log start: nothing visible is left
                self.truncate_fully(self._log_start_offset)
                return
            self._after_truncation(active.next_offset)

    def truncate_fully(self, start_offset: int) -> None:
        """Delete every segment and restart the log empty at `start_offset`."""
        with self._lock:
            self._generation += 1
            now = _now_ms()
            while self.segments:
                self._retire(len(self.segments) - 1)
            self.segments.append(
                LogSegment.create(self.directory, start_offset,
                                  index_interval_bytes=self.config.index_interval_bytes,
                                  now_ms=now)
            )
            self._bases = [start_offset]
            self._dir_dirty = True
            self._log_start_offset = start_offset
            self.cleaner_offset = start_offset
            self.leader_epochs.clear()
            self._after_truncation(start_offset)

    def _after_truncation(self, leo: int) -> None:
        delete_snapshots(self.directory, above=leo)
        self._leo = leo
        self._high_watermark = min(self._high_watermark, leo)
        self._recovery_point = min(self._recovery_point, leo)
        self.cleaner_offset = min(self.cleaner_offset, leo)
        if self.leader_epochs.truncate_from_end(leo):
            self._write_epochs()
        self._write_checkpoint(fsync=False)

    # --- retention --------------------------------------------------------------------------
    def delete_old_segments(self, now_ms: int) -> int:
        """Retention by `retention.ms` / `retention.bytes` (policy `delete`) and by the log
        start offset; never deletes the active segment nor data at or above the high
        watermark. Returns how many segments were deleted."""
        with self._lock:
            deleted = self._delete_segments_below_start()
            cfg = self.config
            if cfg.delete:
                if cfg.retention_ms >= 0:
                    while (self._deletable()
                           and now_ms - self.segments[0].largest_timestamp() > cfg.retention_ms):
                        self._advance_log_start(self._bases[1])
                        self._retire(0)
                        deleted += 1
                if cfg.retention_bytes >= 0:
                    excess = self.size_bytes - cfg.retention_bytes
                    while self._deletable() and excess - self.segments[0].size >= 0:
                        excess -= self.segments[0].size
                        self._advance_log_start(self._bases[1])
                        self._retire(0)
                        deleted += 1
            if deleted:
                delete_snapshots(self.directory, below=self._bases[0], keep_newest=True)
            self.reap_retired()
            return deleted

    def _deletable(self) -> bool:
        """The oldest segment may go: it is not the active one and lies below the high
        watermark (as in Kafka, retention never removes data consumers cannot see yet)."""
        return len(self.segments) > 1 and self._bases[1] <= self._high_watermark

    # --- durability -------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync everything up to the current LEO, then advance the recovery point.

        Blocking: call it from a worker thread. The lock is not held during the fsyncs, and a
        flush with nothing new to sync costs no fsync at all. Index files are not fsynced:
        they are validated when loaded and rebuilt from the log if damaged.
        """
        with self._lock:
            if self._closed:
                return
            generation, leo = self._generation, self._leo
            start = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
            for seg in self.segments[start:]:
                seg.flush(fsync=False)  # pending index entries into the page cache
            targets = [s for s in self.segments[start:] if s.dirty]
            fds = [seg.fd for seg in targets]
            self._unflushed_messages = 0
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            meta_unsynced, self._meta_unsynced = self._meta_unsynced, False
            epochs_unsynced, self._epochs_unsynced = self._epochs_unsynced, False
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
                self._offline = f"fsync failed: {exc}"
            self._io_failed(f"fsync failed: {exc}")
            raise KafkaStorageError(f"flush of {self.directory.name} failed: {exc}") from exc
        with self._lock:
            for seg in targets:
                seg.dirty = False
            if generation == self._generation:
                self._recovery_point = max(self._recovery_point, leo)
            self._last_flush_ms = _now_ms()
            snapshot = None
            if self._checkpoint_changed() or not self._checkpoint_on_disk:
                snapshot = self._snapshot_checkpoint()
            if epochs_unsynced:
                self.leader_epochs.write(fsync=True)
        # The checkpoint's write and fsync happen outside the log's lock, like the data's.
        try:
            if snapshot is not None:
                self._write_checkpoint_snapshot(*snapshot, fsync=True)
                return
            with self._checkpoint_file_lock:
                if not self._checkpoint_synced and not self._closed:
                    # written unsynced since (e.g. a high watermark checkpoint): the same
                    # content, so an fsync makes it durable without rewriting it
                    fsync_file(self.directory / OFFSETS_FILE)
                    self._checkpoint_synced = True
        except OSError as exc:
            self._io_failed(f"checkpoint write failed: {exc}")
            raise KafkaStorageError(f"checkpoint of {self.directory.name} failed: {exc}") from exc

    def start_writeback(self, now_ms: int, *, min_bytes: int, max_delay_ms: int) -> int:
        """Start the kernel's writeback of bytes appended since the last call (see
        `kafkapy.storage.writeback`): when at least `min_bytes` are waiting, or any are and
        the last start was `max_delay_ms` ago. Returns the bytes handed to the kernel.

        For a worker thread: the log's lock only covers picking the ranges. The active
        segment's last partial page is left for later, so an append never writes into a page
        the disk may be reading.
        """
        ranges: list[tuple[int, int, int]] = []
        with self._lock:
            if self._closed or self._offline is not None or not WRITEBACK_SUPPORTED:
                return 0
            # The active segment, and the sealed ones before it back to the first that is
            # done (rolled segments are handed over from the oldest pending one on).
            first = len(self.segments) - 1
            while first > 0:
                seg = self.segments[first - 1]
                if seg.written_back >= seg.size or not seg.is_open:
                    break
                first -= 1
            active = self.segments[-1]
            pending = sum(seg.size - seg.written_back for seg in self.segments[first:]
                          if seg.is_open and seg.size > seg.written_back)
            if pending == 0 or (pending < min_bytes
                                and now_ms - self._last_writeback_ms < max_delay_ms):
                return 0
            for seg in self.segments[first:]:
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
        """`flush.messages` or `flush.ms` says an fsync is due (LogManager.flush_dirty)."""
        return self._unflushed_messages > 0 and (
            self._unflushed_messages >= self.config.flush_messages
            or now_ms - self._last_flush_ms >= self.config.flush_ms
        )

    def checkpoint_offsets(self, *, force: bool = False, now_ms: int | None = None) -> None:
        """Persist the high watermark and friends (log start, recovery point, cleaner offset)
        if any of them changed since the file was written (cheap, no fsync; an unchanged log
        writes nothing). With `now_ms` and not `force`, at most every
        `HW_CHECKPOINT_INTERVAL_MS` (Kafka's replica.high.watermark.checkpoint.interval.ms),
        as the HW moves on every produce."""
        with self._lock:
            if self._closed or not self._checkpoint_changed():
                return
            if not force and now_ms is not None:
                if now_ms - self._last_hw_checkpoint_ms < HW_CHECKPOINT_INTERVAL_MS:
                    return
                self._last_hw_checkpoint_ms = now_ms
            version, state = self._snapshot_checkpoint()
        # The file is written outside the log's lock: appends and reads go on meanwhile.
        self._write_checkpoint_snapshot(version, state, fsync=False)

    def close(self, *, fsync: bool = True) -> None:
        """Flush everything and release fds; the log must not be used afterwards.

        `fsync=False` (LogManager's bulk shutdown) writes every file but syncs nothing and
        leaves the recovery point alone: the caller runs one sync(2) for all logs and then
        `mark_synced()` on each, instead of thousands of separate fsyncs.
        """
        with self._lock:
            if self._closed:
                return
            if self._offline is None:
                active = self.segments[-1]
                if active.index.loaded and active.time_index.loaded:  # written or read this run
                    with contextlib.suppress(KafkaStorageError, OSError):
                        active.seal()  # its last time index entry, as Kafka writes at close
                with contextlib.suppress(KafkaStorageError):
                    if fsync:
                        self.flush()
                    else:
                        self._write_unsynced()
            self._closed = True
            for seg in self.segments:
                seg.close()
            self.reap_retired(force=True)

    def _write_unsynced(self) -> None:
        for seg in self.segments:
            seg.flush(fsync=False)
        if self._epochs_unsynced:
            self.leader_epochs.write(fsync=False)

    def mark_synced(self) -> None:
        """After a sync(2) that followed `close(fsync=False)`: everything up to the LEO is
        durable, so checkpoint it as the recovery point (an old checkpoint surviving a crash
        here only means more recovery)."""
        with self._lock:
            if self._offline is None:
                self._recovery_point = self._leo
                if self._checkpoint_changed() or not self._checkpoint_on_disk:
                    self._write_checkpoint(fsync=False)

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with self._lock:
            self._closed = True
            for seg in self.segments:
                seg.close()
            self.reap_retired(force=True)
            with self._checkpoint_file_lock:  # no checkpoint write half way through
                shutil.rmtree(self.directory, ignore_errors=True)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
