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
shutdown reads the index tail of the active segment only.

Layers (Kafka's `UnifiedLog` over `LocalLog` over `LogSegments`)
-----------------------------------------------------------------
- `PartitionLog` (here): what callers use. Leader and follower append, reads, the high
  watermark, log start offset and LSO, leader epochs, DeleteRecords, and what goes into
  `offsets.checkpoint`. It decides; the local log does the file work.
- `LocalLog` (`local_log.py`): the segments in this directory, rolling, truncation, deletion
  of local segments, flush, writeback, and writing checkpoint snapshots in order.
- `LogSegments` (`log_segments.py`): the ordered segments and the lookups over them.
Opening and recovery are in `recovery.py`, ListOffsets and transaction files in `queries.py`.
Every offset from the log start on is local today; a remote tier (KIP-405) would slot in beside
the local log and serve what lies below its first segment (see `read`).

Thread-safety contract
----------------------
- One re-entrant lock per log guards the segment list, offsets and indexes. `append` (called
  from the trio thread) holds it only to assign offsets and `pwrite` into the page cache; CRC
  validation of the incoming bytes happens before the lock is taken, and no fsync ever happens
  in `append`. `validate` (the record walk of a client batch, seconds for a compression bomb)
  reads nothing of the log but its config and may run in a worker thread; `append` of what it
  returns does not walk again.
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

import contextlib
import logging
import struct
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from kafkapy.protocol.errors import InvalidRecordError, ProtocolError
from kafkapy.protocol.records import BatchHeader, set_max_timestamp
from kafkapy.storage.checkpoint import (
    LeaderEpochCache,
    OffsetsCheckpoint,
    PartitionMetadata,
)
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import (
    InconsistentTopicIdError,
    InvalidLogConfigError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from kafkapy.storage.local_log import LocalLog
from kafkapy.storage.local_log import now_ms as _now_ms
from kafkapy.storage.queries import LogQueries
from kafkapy.storage.recovery import (
    list_directory,
    load_segments,
    recover_segments,
    remove_stray_snapshots,
)
from kafkapy.storage.results import AppendResult, FileSlice, ReadResult, ValidatedBatches
from kafkapy.storage.segment import LogSegment, parse_append_input
from kafkapy.storage.validator import RecordRules

__all__ = ["AppendResult", "FileSlice", "PartitionLog", "ReadResult", "ValidatedBatches"]

log = logging.getLogger(__name__)

HW_CHECKPOINT_INTERVAL_MS = 5000
# Record batch v2: baseOffset (int64) at byte 0 and partitionLeaderEpoch (int32) at byte 12 of a
# batch, both outside the CRC - what `append` stamps into the client's bytes.
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_AT = 12


class PartitionLog(LogQueries):
    """A partition's log in `directory`; see the module docstring for the layers and locking."""

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
        self._lock = threading.RLock()
        self._local = LocalLog(self.directory, self.config, self._lock, self._io_failed,
                               now_ms=now_ms if now_ms is not None else _now_ms())
        self._segments = self._local.segments
        self._epochs_unsynced = False
        self._last_hw_checkpoint_ms = 0
        #: on a tiered topic (`remote.storage.enable`), the last offset the remote tier holds as
        #: the remote log manager knows it (-1: nothing copied yet); retention never deletes a
        #: local segment past it (`delete_old_segments`)
        self.remote_copied_offset = -1
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
        self._local.config = self.config
        self._segments.set_index_interval(self.config.index_interval_bytes)
        self._rules = RecordRules(self.config)  # Kafka's record-level rules, per config
        self._open(clean_shutdown, self._local.last_flush_ms)

    # --- opening ------------------------------------------------------------------------------
    def _load_metadata(self, topic_id: uuid.UUID | None) -> PartitionMetadata:
        meta = PartitionMetadata.read(self.directory)
        if meta is None:
            meta = PartitionMetadata(topic_id=topic_id or uuid.UUID(int=0))
            meta.write(self.directory, fsync=False)  # made durable by the first flush()
            self._local.meta_unsynced = True
        elif topic_id is not None and topic_id != meta.topic_id:
            if meta.topic_id.int != 0:
                raise InconsistentTopicIdError(
                    f"{self.directory.name} belongs to topic id {meta.topic_id}, not {topic_id}"
                )
            meta.topic_id = topic_id
            meta.write(self.directory, fsync=False)
            self._local.meta_unsynced = True
        return meta

    def _open(self, clean_shutdown: bool, now_ms: int) -> None:
        """Load the local segments, recover them when the stop was unclean (or the active
        segment's tail is torn), then settle the partition's offsets around the result."""
        local, segments = self._local, self._segments
        entries = list_directory(self.directory)
        bases = load_segments(segments, entries)
        ckpt = OffsetsCheckpoint.read(self.directory)
        if ckpt is None:
            clean_shutdown = not bases  # a brand-new log has nothing to recover
            ckpt = OffsetsCheckpoint(log_start_offset=bases[0] if bases else 0)
        if not len(segments):
            segments.create(ckpt.log_start_offset, now_ms)
        self._log_start_offset = max(ckpt.log_start_offset, segments.bases[0])
        # Segments wholly below the log start offset were being deleted when we stopped.
        while len(segments) > 1 and segments.bases[1] <= self._log_start_offset:
            segments.pop(0).unlink()
        local.recovery_point = ckpt.recovery_point
        self.leader_epochs = LeaderEpochCache.load(self.directory)
        if not clean_shutdown:
            self._epochs_unsynced |= recover_segments(segments, ckpt.recovery_point,
                                                      self.leader_epochs)
        elif not segments.active.open_as_active():
            log.warning("%s: torn tail after a clean shutdown; recovering the active segment",
                        self.directory.name)
            self._epochs_unsynced |= recover_segments(segments, segments.active.base_offset,
                                                      self.leader_epochs)
        leo = local.log_end_offset = segments.active.next_offset
        remove_stray_snapshots(self.directory, entries, leo)
        self._high_watermark = min(max(ckpt.high_watermark, self._log_start_offset), leo)
        self._last_stable: int | None = None
        self.cleaner_offset = max(min(ckpt.cleaner_offset, leo), self._log_start_offset)
        epochs_changed = self.leader_epochs.truncate_from_end(leo)
        epochs_changed |= self.leader_epochs.truncate_from_start(self._log_start_offset)
        if epochs_changed:
            self._write_epochs()
        self._settle_checkpoint(ckpt, existed=bool(bases))

    def _settle_checkpoint(self, ckpt: OffsetsCheckpoint, *, existed: bool) -> None:
        """Bring the offsets checkpoint in line with the recovered log. Recovery does not fsync
        (opening thousands of logs must stay fast): the recovery point stays where it was and
        the next flush() syncs the recovered segments."""
        local = self._local
        local.recovery_point = min(local.recovery_point, local.log_end_offset)
        current = self._checkpoint_state()
        if existed and current == ckpt:
            local.checkpointed = current
            local.checkpoint_on_disk = local.checkpoint_synced = True
        elif existed:
            self._write_checkpoint(fsync=False)
        else:  # a brand-new log gets its checkpoint file at the first flush or change
            local.checkpointed = current

    # --- properties -----------------------------------------------------------------------
    @property
    def segments(self) -> list[LogSegment]:
        """The local segments in offset order, the active one last (read under `_lock`)."""
        return self._segments.segments

    @property
    def topic_id(self) -> uuid.UUID:
        return self._metadata.topic_id

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def truncations(self) -> int:
        """How many times the tail was cut (truncation, or a restart at a new offset): state
        derived from the log (producer state) that was read before a change is stale."""
        return self._local.truncations

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set by the replication layer; clamped to [log start, LEO], checkpointed on flush."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset),
                                       self._local.log_end_offset)
            if self._high_watermark < self._local.checkpointed.high_watermark:
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
        return self._segments.size_bytes

    @property
    def offline(self) -> bool:
        return self._local.offline is not None

    def set_config(self, config: LogConfig, defaults: LogConfig | None = None) -> None:
        """Apply a new topic config (persisted as overrides of `defaults`)."""
        with self._lock:
            self.config = self._local.config = config
            self._segments.set_index_interval(config.index_interval_bytes)
            overrides = config.overrides(defaults if defaults is not None else LogConfig())
            if overrides != self._metadata.config_overrides:
                self._metadata.config_overrides = overrides
                # no fsync here (CreateTopics runs on the event loop): the next flush() syncs
                self._metadata.write(self.directory, fsync=False)
                self._local.meta_unsynced = True

    @property
    def config_overrides(self) -> dict[str, str]:
        return dict(self._metadata.config_overrides)

    # --- append ---------------------------------------------------------------------------
    def validate(self, batches: bytes | bytearray | memoryview, now_ms: int) -> ValidatedBatches:
        """Frame, CRC-check and walk a client's batches under the topic config of now (Kafka's
        LogValidator); `append` then writes the result without walking it again.

        Thread-safe: it reads no log state but the config snapshot, and touches only its own
        copy of the bytes (or the caller's writable view), so a large or compressed batch can
        be walked in a worker thread while the event loop serves other clients. Raises what
        `append` raises for a refused batch; nothing is written.
        """
        return ValidatedBatches(*self._validate(batches, now_ms))

    def _validate(
        self, batches: bytes | bytearray | memoryview, now_ms: int
    ) -> tuple[bytearray | memoryview, list[tuple[int, BatchHeader]], LogConfig]:
        """`validate` without its result object (the inline produce path allocates none)."""
        data = batches if isinstance(batches, memoryview) and not batches.readonly else bytearray(batches)
        config = self.config
        headers = parse_append_input(data, config.max_message_bytes)
        rules = self._rules
        if rules.config is not config:
            rules = self._rules = RecordRules(config)
        for pos, header in headers:
            if header.is_control:
                raise InvalidRecordError("clients may not produce control batches")
            rules.validate(data, pos, header, now_ms, self.directory.name)
        return data, headers, config

    def append(
        self,
        batches: bytes | bytearray | memoryview | ValidatedBatches,
        *,
        now_ms: int,
        leader_epoch: int = 0,
        from_client: bool = True,
    ) -> AppendResult:
        """Validate, assign offsets (patching the bytes), write. Called on the trio thread.

        `batches` from `validate` are written as validated (not walked again); raw bytes are
        validated here first. `from_client=False` is for batches the broker writes itself
        (transaction markers), which may be control batches; clients may not send those
        (INVALID_RECORD). A writable memoryview (the server's receive buffer of a produce
        request) is patched and written as it is, saving a copy of the batches; anything else
        is copied first.
        """
        if isinstance(batches, ValidatedBatches):
            data, headers = batches.data, batches.headers
        elif from_client:
            data, headers, _ = self._validate(batches, now_ms)
        else:
            data = batches if isinstance(batches, memoryview) and not batches.readonly else bytearray(batches)
            headers = parse_append_input(data, self.config.max_message_bytes)
        log_append_time = self.config.log_append_time
        local = self._local
        with self._lock:
            local.check_writable()
            base = next_offset = local.log_end_offset
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
            local.append(data, headers, now_ms)
            if self.leader_epochs.assign(leader_epoch, base):
                self._write_epochs()
            local.unflushed_messages += messages
            return AppendResult(
                base_offset=base,
                last_offset=next_offset - 1,
                log_append_time_ms=now_ms if log_append_time else -1,
                log_start_offset=self._log_start_offset,
                batches=len(headers),
                flush_needed=local.unflushed_messages >= self.config.flush_messages,
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
        local = self._local
        with self._lock:
            local.check_writable()
            first = headers[0][1]
            restart_at = None
            leo = local.log_end_offset
            if leo == self._log_start_offset and first.base_offset < leo <= first.last_offset:
                restart_at = self._log_start_offset
                self.truncate_fully(first.base_offset)
            expected = local.log_end_offset
            for _, header in headers:
                if header.base_offset < expected:
                    raise InvalidRecordError(
                        f"batch offset {header.base_offset} is below the log end offset {expected}"
                    )
                expected = header.last_offset + 1
            local.append(data, headers, now_ms if now_ms is not None else _now_ms())
            changed = False
            for _, header in headers:
                changed |= self.leader_epochs.assign(
                    header.partition_leader_epoch, header.base_offset
                )
            if changed:
                self._write_epochs()
            if restart_at is not None:
                self._advance_log_start(restart_at)
            local.unflushed_messages += sum(h.records_count for _, h in headers)
            return AppendResult(
                base_offset=headers[0][1].base_offset,
                last_offset=expected - 1,
                log_append_time_ms=-1,
                log_start_offset=self._log_start_offset,
                batches=len(headers),
                flush_needed=local.unflushed_messages >= self.config.flush_messages,
            )

    def _io_failed(self, reason: str) -> None:
        listener = self.io_failure_listener
        if listener is not None:
            listener(self.directory, reason)

    def roll(self, now_ms: int | None = None) -> None:
        """Force a new active segment (tests, and the cleaner wanting the tail cleanable)."""
        with self._lock:
            if self._segments.active.size:
                self._local.roll(self._local.log_end_offset,
                                 now_ms if now_ms is not None else _now_ms())

    # --- read -----------------------------------------------------------------------------
    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        leo = self._local.log_end_offset
        return OffsetOutOfRangeError(
            f"offset {offset} is outside [{self._log_start_offset}, {leo}]",
            log_start_offset=self._log_start_offset,
            log_end_offset=leo,
        )

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> ReadResult:
        """Whole batches from the batch holding `offset`, up to `max_bytes` (KIP-74: at least
        one batch even when larger). `max_offset` (exclusive, e.g. the high watermark) hides
        every batch whose last offset is at or past it (as in Kafka). Binary search in the
        index plus a short scan; no copies.

        Every offset in [log start, LEO] is served by the local log. A remote tier would take
        the offsets below the local log's first segment here, before the local read.

        Damage found in a segment below the recovery point (bit rot) raises KafkaStorageError.
        """
        with self._lock:
            leo = self._local.log_end_offset
            if offset < self._log_start_offset or offset > leo:
                raise self._out_of_range(offset)
            limit = leo if max_offset is None else min(max_offset, leo)
            slices: list[FileSlice] = []
            try:
                first = self._local.read_into(offset, max_bytes, limit, slices)
            except (ProtocolError, OSError) as exc:
                raise KafkaStorageError(f"{self.directory.name}: cannot read at {offset}: {exc}"
                                        ) from exc
            return ReadResult(
                slices=slices,
                first_offset=first,
                high_watermark=self._high_watermark,
                last_stable_offset=self.last_stable_offset,
                log_start_offset=self._log_start_offset,
                log_end_offset=leo,
            )

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
                    log_end_offset=self._local.log_end_offset,
                )
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
            self._local.delete_below(self._log_start_offset)
            return self._log_start_offset

    def follow_log_start(self, offset: int) -> int:
        """Follower: move the log start up to the leader's (never down, never past the LEO);
        whole segments below it go as with DeleteRecords. Returns the log start offset."""
        with self._lock:
            offset = min(offset, self._local.log_end_offset)
            if offset > self._log_start_offset:
                self._advance_log_start(offset)
                self._high_watermark = max(self._high_watermark, offset)
                self._local.delete_below(self._log_start_offset)
            return self._log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self._log_start_offset = offset
        self.cleaner_offset = max(self.cleaner_offset, offset)
        if self.leader_epochs.truncate_from_start(offset):
            self._write_epochs()
        self._write_checkpoint(fsync=False)

    def replace_segments(self, old: list[LogSegment], new: Iterable[LogSegment]) -> None:
        """Swap `old` (contiguous, not the active one) for `new` (the cleaner's output)."""
        self._local.replace_segments(old, new)

    def reap_retired(self, *, force: bool = False) -> None:
        """Close fds of deleted segments once `file.delete.delay.ms` has passed."""
        self._local.reap_retired(force=force)

    # --- truncation -------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Follower truncation: remove every batch whose last offset is >= `offset`.

        A batch straddling `offset` is removed whole, so the LEO may end below `offset`. At or
        below the log start offset nothing visible remains: the log restarts empty there (at
        `offset`, as Kafka's truncate-fully does).
        """
        with self._lock:
            if offset >= self._local.log_end_offset:
                return
            if offset <= self._log_start_offset:
                self.truncate_fully(offset)
                return
            end = self._local.truncate_to(offset)
            if end < self._log_start_offset:
                # the removed batch straddled the log start: nothing visible is left
                self.truncate_fully(self._log_start_offset)
                return
            self._after_truncation(end)

    def truncate_fully(self, start_offset: int) -> None:
        """Delete every segment and restart the log empty at `start_offset`."""
        with self._lock:
            self._local.truncate_fully(start_offset, _now_ms())
            self._log_start_offset = start_offset
            self.cleaner_offset = start_offset
            self.leader_epochs.clear()
            self._after_truncation(start_offset)

    def restore_leader_epochs(self, entries: Iterable[tuple[int, int]]) -> None:
        """A follower restarted at the leader's local log start (KIP-405) takes the leader
        epochs of the history it skipped from the remote tier's copied checkpoint, so its
        last fetched epoch and OffsetForLeaderEpoch answers are the leader's."""
        with self._lock:
            for epoch, offset in entries:
                self.leader_epochs.assign(epoch, offset)
            self.leader_epochs.truncate_from_start(self._log_start_offset)
            self._write_epochs()

    def _after_truncation(self, leo: int) -> None:
        self._local.after_truncation(leo)
        self._high_watermark = min(self._high_watermark, leo)
        self.cleaner_offset = min(self.cleaner_offset, leo)
        if self.leader_epochs.truncate_from_end(leo):
            self._write_epochs()
        self._write_checkpoint(fsync=False)

    # --- retention --------------------------------------------------------------------------
    def delete_old_segments(self, now_ms: int) -> int:
        """Retention by `retention.ms` / `retention.bytes` (policy `delete`) and by the log
        start offset; never deletes the active segment nor data at or above the high
        watermark. Returns how many segments were deleted.

        The log start moves first and is checkpointed, then the local segments below it go.
        On a tiered topic (KIP-405) the rule is `local.retention.*` and only over segments
        wholly copied to the remote tier (`remote_copied_offset`): the log start kept here is
        then the local log start, and the remote tier holds what lies below it.
        """
        with self._lock:
            local = self._local
            deleted = local.delete_below(self._log_start_offset)
            upper, limits = self._high_watermark, None
            if self.tiered:
                upper = min(upper, self.remote_copied_offset + 1)
                limits = self._local_retention()
            breached = local.retention_breaches(now_ms, upper, limits=limits)
            if breached:
                self._advance_log_start(self._segments.bases[breached])
                deleted += local.delete_below(self._log_start_offset)
            local.reap_retired()
            return deleted

    @property
    def tiered(self) -> bool:
        """The topic has `remote.storage.enable=true`: its rolled segments go to the remote tier."""
        return self.config.extra.get("remote.storage.enable", "false").strip().lower() == "true"

    def _local_retention(self) -> tuple[int, int]:
        """(ms, bytes) of `local.retention.*`, where -2 means the total `retention.*`."""
        extra = self.config.extra
        ms = int(extra.get("local.retention.ms", "-2"))
        size = int(extra.get("local.retention.bytes", "-2"))
        return (self.config.retention_ms if ms == -2 else ms,
                self.config.retention_bytes if size == -2 else size)

    # --- durability -------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync everything up to the current LEO, then advance the recovery point and write
        the offsets checkpoint (and the leader epochs) durably.

        Blocking: call it from a worker thread. The lock is not held during the fsyncs, and a
        flush with nothing new to sync costs no fsync at all (see `LocalLog.flush`).
        """
        if not self._local.flush():
            return
        with self._lock:
            snapshot = None
            if self._checkpoint_changed() or not self._local.checkpoint_on_disk:
                snapshot = self._snapshot_checkpoint()
            epochs_unsynced, self._epochs_unsynced = self._epochs_unsynced, False
            if epochs_unsynced:
                self.leader_epochs.write(fsync=True)
        # The checkpoint's write and fsync happen outside the log's lock, like the data's.
        try:
            if snapshot is not None:
                self._write_checkpoint_snapshot(*snapshot, fsync=True)
            else:
                self._local.sync_checkpoint()
        except OSError as exc:
            self._io_failed(f"checkpoint write failed: {exc}")
            raise KafkaStorageError(f"checkpoint of {self.directory.name} failed: {exc}") from exc

    def start_writeback(self, now_ms: int, *, min_bytes: int, max_delay_ms: int) -> int:
        """Start the kernel's writeback of bytes appended since the last call (see
        `LocalLog.start_writeback`); returns the bytes handed to the kernel."""
        return self._local.start_writeback(now_ms, min_bytes=min_bytes,
                                           max_delay_ms=max_delay_ms)

    def needs_flush(self, now_ms: int) -> bool:
        """`flush.messages` or `flush.ms` says an fsync is due (LogManager.flush_dirty)."""
        return self._local.needs_flush(now_ms)

    def checkpoint_offsets(self, *, force: bool = False, now_ms: int | None = None) -> None:
        """Persist the high watermark and friends (log start, recovery point, cleaner offset)
        if any of them changed since the file was written (cheap, no fsync; an unchanged log
        writes nothing). With `now_ms` and not `force`, at most every
        `HW_CHECKPOINT_INTERVAL_MS` (Kafka's replica.high.watermark.checkpoint.interval.ms),
        as the HW moves on every produce."""
        with self._lock:
            if self._local.closed or not self._checkpoint_changed():
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
            local = self._local
            if local.closed:
                return
            if local.offline is None:
                local.seal_active_for_close()
                with contextlib.suppress(KafkaStorageError):
                    if fsync:
                        self.flush()
                    else:
                        local.write_unsynced()
                        if self._epochs_unsynced:
                            self.leader_epochs.write(fsync=False)
            local.close()

    def mark_synced(self) -> None:
        """After a sync(2) that followed `close(fsync=False)`: everything up to the LEO is
        durable, so checkpoint it as the recovery point (an old checkpoint surviving a crash
        here only means more recovery)."""
        with self._lock:
            local = self._local
            if local.offline is None:
                local.recovery_point = local.log_end_offset
                if self._checkpoint_changed() or not local.checkpoint_on_disk:
                    self._write_checkpoint(fsync=False)

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with self._lock:
            self._local.delete_directory()

    # --- offsets checkpoint: what goes in (the file side is LocalLog's) -----------------------
    def _checkpoint_state(self) -> OffsetsCheckpoint:
        return OffsetsCheckpoint(
            log_start_offset=self._log_start_offset,
            recovery_point=self._local.recovery_point,
            high_watermark=self._high_watermark,
            cleaner_offset=self.cleaner_offset,
        )

    def offsets_checkpointed(self) -> bool:
        """`offsets.checkpoint` holds the log's offsets as they are: a flush pass has nothing
        to write for it (read without the lock; a racing change shows at the next pass)."""
        return not self._checkpoint_changed()

    def _checkpoint_changed(self) -> bool:
        """The offsets differ from what `offsets.checkpoint` holds. A brand-new log without
        the file counts as unchanged until its offsets move (a missing file reads as "recover
        fully", which is right for it); flush and close write the file regardless."""
        return self._checkpoint_state() != self._local.checkpointed

    def _write_checkpoint(self, *, fsync: bool) -> None:
        """Write the current offsets now (caller holds the log's lock)."""
        version, state = self._snapshot_checkpoint()
        self._local.write_checkpoint(version, state, fsync=fsync, even_if_closed=True)

    def _snapshot_checkpoint(self) -> tuple[int, OffsetsCheckpoint]:
        """Under the log's lock: the offsets to write and their place in the order of
        snapshots, so a write that lost a race never replaces a newer file."""
        return self._local.next_checkpoint_version(), self._checkpoint_state()

    def _write_checkpoint_snapshot(self, version: int, state: OffsetsCheckpoint, *,
                                   fsync: bool) -> bool:
        """Write a snapshot taken earlier, outside the log's lock; False when a newer one was
        written meanwhile or the log was closed (see `LocalLog.write_checkpoint`)."""
        return self._local.write_checkpoint(version, state, fsync=fsync)

    def _write_epochs(self) -> None:
        """Mark the leader-epoch cache for the next flush() (recovery rebuilds it from the
        batches' own epochs, so writing it on the append path would only cost time)."""
        self._epochs_unsynced = True
