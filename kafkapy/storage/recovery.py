"""Opening a `PartitionLog`: reading its directory, recovery after an unclean stop, and the
offsets checkpoint bookkeeping both opening and the running log share.

Kept apart from `log.py` because it is a phase of its own: it runs once per log at broker start
(thousands of times in a row, so it must stay a directory listing, a few small reads and a tail
scan per log after a clean shutdown) and never concurrently with appends, while `log.py` is the
running log's append/read/maintenance paths and their locking rules.

Recovery (unclean stop): segments from the one holding the recovery point on are re-validated
batch by batch (CRC included); the first torn or corrupt batch ends the log there, later segments
are dropped, and the leader-epoch cache is rebuilt from the batches' own epochs. Nothing is
fsynced while opening: the recovery point stays where it was and the next flush syncs what
recovery rewrote.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
import uuid
from pathlib import Path

from kafkapy.storage.checkpoint import LeaderEpochCache, OffsetsCheckpoint, PartitionMetadata
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import InconsistentTopicIdError
from kafkapy.storage.segment import LogSegment
from kafkapy.storage.swap import SWAP_MARKER, finish_interrupted_swap

__all__ = ["LogRecovery"]

log = logging.getLogger(__name__)

_TRANSIENT_SUFFIXES = (".tmp", ".deleted")


class LogRecovery:
    """Mixin for `PartitionLog` (which provides these attributes): open-time code and the
    offsets checkpoint. Runs under the log's lock or before the log is shared."""

    directory: Path
    config: LogConfig
    segments: list[LogSegment]
    leader_epochs: LeaderEpochCache
    cleaner_offset: int
    _lock: threading.RLock
    _bases: list[int]
    _leo: int
    _log_start_offset: int
    _recovery_point: int
    _high_watermark: int
    _last_stable: int | None
    _meta_unsynced: bool
    _epochs_unsynced: bool
    _checkpointed: OffsetsCheckpoint
    _checkpoint_on_disk: bool
    _checkpoint_synced: bool
    _closed: bool
    _checkpoint_file_lock: threading.Lock
    _checkpoint_version: int
    _checkpoint_written_version: int

    def _load_metadata(self, topic_id: uuid.UUID | None) -> PartitionMetadata:
        meta = PartitionMetadata.read(self.directory)
        if meta is None:
            meta = PartitionMetadata(topic_id=topic_id or uuid.UUID(int=0))
            meta.write(self.directory, fsync=False)  # made durable by the first flush()
            self._meta_unsynced = True
        elif topic_id is not None and topic_id != meta.topic_id:
            if meta.topic_id.int != 0:
                raise InconsistentTopicIdError(
                    f"{self.directory.name} belongs to topic id {meta.topic_id}, not {topic_id}"
                )
            meta.topic_id = topic_id
            meta.write(self.directory, fsync=False)
            self._meta_unsynced = True
        return meta

    def _open(self, clean_shutdown: bool, now_ms: int) -> None:
        with os.scandir(self.directory) as it:
            entries = list(it)
        # Only a directory the cleaner left mid-swap needs the swap repair; checking the listing
        # we need anyway (instead of a marker read and a glob per log) keeps opening 10,000 logs fast.
        if any(e.name == SWAP_MARKER or e.name.endswith(".cleaned") for e in entries):
            finish_interrupted_swap(self.directory)
            with os.scandir(self.directory) as it:
                entries = list(it)
        bases = self._load_segments(entries)
        interval = self.config.index_interval_bytes
        ckpt = OffsetsCheckpoint.read(self.directory)
        if ckpt is None:
            clean_shutdown = not bases  # a brand-new log has nothing to recover
            ckpt = OffsetsCheckpoint(log_start_offset=bases[0] if bases else 0)
        if not self.segments:
            self.segments.append(
                LogSegment.create(self.directory, ckpt.log_start_offset,
                                  index_interval_bytes=interval, now_ms=now_ms)
            )
        self._bases = [s.base_offset for s in self.segments]
        self._log_start_offset = max(ckpt.log_start_offset, self.segments[0].base_offset)
        # Segments wholly below the log start offset were being deleted when we stopped.
        while len(self.segments) > 1 and self.segments[1].base_offset <= self._log_start_offset:
            self.segments.pop(0).unlink()
            self._bases.pop(0)
        self._recovery_point = ckpt.recovery_point
        self.leader_epochs = LeaderEpochCache.load(self.directory)
        if not clean_shutdown:
            self._recover(ckpt.recovery_point)
        elif not self.segments[-1].open_as_active():
            log.warning("%s: torn tail after a clean shutdown; recovering the active segment",
                        self.directory.name)
            self._recover(self.segments[-1].base_offset)
        self._leo = self.segments[-1].next_offset
        self._remove_stray_snapshots(entries)
        self._high_watermark = min(max(ckpt.high_watermark, self._log_start_offset), self._leo)
        self._last_stable = None
        self.cleaner_offset = max(min(ckpt.cleaner_offset, self._leo), self._log_start_offset)
        epochs_changed = self.leader_epochs.truncate_from_end(self._leo)
        epochs_changed |= self.leader_epochs.truncate_from_start(self._log_start_offset)
        if epochs_changed:
            self._write_epochs()
        self._settle_checkpoint(ckpt, existed=bool(bases))

    def _load_segments(self, entries: list[os.DirEntry[str]]) -> list[int]:
        """Open the segments of the listing (in offset order) and drop transient files a crash
        left; returns the base offsets found on disk."""
        bases: list[int] = []
        sizes: dict[int, int] = {}
        for entry in entries:
            name = entry.name
            if name.endswith(_TRANSIENT_SUFFIXES):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
            elif name.endswith(".log") and name[:-4].isdigit():
                base = int(name[:-4])
                bases.append(base)
                sizes[base] = entry.stat().st_size
        bases.sort()
        for base in bases:
            seg = LogSegment(
                self.directory, base, index_interval_bytes=self.config.index_interval_bytes
            )
            seg.load_state(sizes[base])
            self.segments.append(seg)
        return bases

    def _settle_checkpoint(self, ckpt: OffsetsCheckpoint, *, existed: bool) -> None:
        """Bring the offsets checkpoint in line with the recovered log. Recovery does not fsync
        (opening thousands of logs must stay fast): the recovery point stays where it was and
        the next flush() syncs the recovered segments."""
        self._recovery_point = min(self._recovery_point, self._leo)
        current = self._checkpoint_state()
        if existed and current == ckpt:
            self._checkpointed = current
            self._checkpoint_on_disk = self._checkpoint_synced = True
        elif existed:
            self._write_checkpoint(fsync=False)
        else:  # a brand-new log gets its checkpoint file at the first flush or change
            self._checkpointed = current

    def _remove_stray_snapshots(self, entries: list[os.DirEntry[str]]) -> None:
        """Producer snapshots above the recovered log end describe data the log no longer has
        (a crash lost the tail): once replication refilled those offsets with other batches
        they would be read as the state there, so they go (Kafka's stray snapshot removal)."""
        for entry in entries:
            stem = entry.name[: -len(".snapshot")]
            if entry.name.endswith(".snapshot") and stem.isdigit() and int(stem) > self._leo:
                log.warning("%s: removing producer snapshot %d above the log end %d",
                            self.directory.name, int(stem), self._leo)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)

    def _recover(self, recovery_point: int) -> None:
        """Re-validate segments from the one holding `recovery_point`, cutting at damage."""
        start = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        expected = self.segments[start].base_offset
        # The leader-epoch checkpoint is written lazily; the batches themselves carry the
        # epoch, so the cache is rebuilt from them for everything being recovered.
        if self.leader_epochs.truncate_from_end(expected):
            self._epochs_unsynced = True
        i = start
        # Not max.message.bytes: it may have been lowered since valid larger batches were
        # written. The file size bounds every read; the CRC decides.
        max_batch = (1 << 31) + 12
        while i < len(self.segments):
            seg = self.segments[i]
            truncated, reason = seg.recover(expected, max_batch)
            if truncated:
                log.warning(
                    "%s: truncated %d bytes at the end of %s (%s); dropping %d later segment(s)",
                    self.directory.name, truncated, seg.log_path.name, reason,
                    len(self.segments) - i - 1,
                )
            if i + 1 < len(self.segments):
                seg.seal()
                seg.flush(fsync=False)
            seg.dirty = True  # the rebuilt indexes and any cut are synced by the next flush
            for epoch, offset in seg.recovered_epochs:
                if self.leader_epochs.assign(epoch, offset):
                    self._epochs_unsynced = True
            expected = seg.next_offset
            if truncated:
                self._drop_segments_after(i)
                break
            if i + 1 < len(self.segments) and self.segments[i + 1].base_offset < expected:
                log.warning("%s: segment %s overlaps its predecessor; dropping it and later ones",
                            self.directory.name, self.segments[i + 1].log_path.name)
                self._drop_segments_after(i)
                break
            i += 1
        self.segments[-1].open_as_active()

    def _drop_segments_after(self, i: int) -> None:
        """Delete every segment after segment `i`: what follows damage cannot be trusted to
        continue the log's offsets."""
        for later in self.segments[i + 1 :]:
            later.close()
            later.unlink()
        del self.segments[i + 1 :]
        del self._bases[i + 1 :]

    # --- offsets checkpoint ----------------------------------------------------------------
    def _checkpoint_state(self) -> OffsetsCheckpoint:
        return OffsetsCheckpoint(
            log_start_offset=self._log_start_offset,
            recovery_point=self._recovery_point,
            high_watermark=self._high_watermark,
            cleaner_offset=self.cleaner_offset,
        )

    def _checkpoint_changed(self) -> bool:
        """The offsets differ from what `offsets.checkpoint` holds. A brand-new log without
        the file counts as unchanged until its offsets move (a missing file reads as "recover
        fully", which is right for it); flush and close write the file regardless."""
        return self._checkpoint_state() != self._checkpointed

    def _write_checkpoint(self, *, fsync: bool) -> None:
        """Write the current offsets now (caller holds the log's lock)."""
        version, state = self._snapshot_checkpoint()
        self._write_checkpoint_snapshot(version, state, fsync=fsync, even_if_closed=True)

    def _snapshot_checkpoint(self) -> tuple[int, OffsetsCheckpoint]:
        """Under the log's lock: the offsets to write and their place in the order of
        snapshots, so a write that lost a race never replaces a newer file."""
        self._checkpoint_version += 1
        return self._checkpoint_version, self._checkpoint_state()

    def _write_checkpoint_snapshot(self, version: int, state: OffsetsCheckpoint, *,
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
            if self._closed and not even_if_closed:
                return False  # closed or deleted meanwhile: its directory may be gone
            state.write(self.directory, fsync=fsync)
            self._checkpoint_written_version = version
            self._checkpointed = state
            self._checkpoint_on_disk = True
            self._checkpoint_synced = fsync
        return True

    def _write_epochs(self) -> None:
        """Mark the leader-epoch cache for the next flush() (recovery rebuilds it from the
        batches' own epochs, so writing it on the append path would only cost time)."""
        self._epochs_unsynced = True
