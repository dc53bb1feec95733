"""Opening a local log: reading its directory and recovery after an unclean stop.

Kept apart from `local_log.py` because it is a phase of its own: it runs once per log at broker
start (thousands of times in a row, so it must stay a directory listing, a few small reads and a
tail scan per log after a clean shutdown) and never concurrently with appends. These functions
fill a `LogSegments`; `PartitionLog` settles its offsets and checkpoint around them.

Recovery (unclean stop): segments from the one holding the recovery point on are re-validated
batch by batch (CRC included); the first torn or corrupt batch ends the log there, later segments
are dropped, and the leader-epoch cache is rebuilt from the batches' own epochs. Nothing is
fsynced while opening: the recovery point stays where it was and the next flush syncs what
recovery rewrote.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from kafkapy.storage.checkpoint import LeaderEpochCache
from kafkapy.storage.log_segments import LogSegments
from kafkapy.storage.segment import LogSegment
from kafkapy.storage.swap import SWAP_MARKER, finish_interrupted_swap

__all__ = ["list_directory", "load_segments", "recover_segments", "remove_stray_snapshots"]

log = logging.getLogger(__name__)

_TRANSIENT_SUFFIXES = (".tmp", ".deleted")


def list_directory(directory: Path) -> list[os.DirEntry[str]]:
    """The log directory's entries, after finishing a compaction swap a crash interrupted."""
    with os.scandir(directory) as it:
        entries = list(it)
    # Only a directory the cleaner left mid-swap needs the swap repair; checking the listing
    # we need anyway (instead of a marker read and a glob per log) keeps opening 10,000 logs fast.
    if any(e.name == SWAP_MARKER or e.name.endswith(".cleaned") for e in entries):
        finish_interrupted_swap(directory)
        with os.scandir(directory) as it:
            entries = list(it)
    return entries


def load_segments(segments: LogSegments, entries: list[os.DirEntry[str]]) -> list[int]:
    """Open the segments of the listing (in offset order) into `segments` and drop transient
    files a crash left; returns the base offsets found on disk."""
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
        seg = LogSegment(segments.directory, base,
                         index_interval_bytes=segments.index_interval_bytes)
        seg.load_state(sizes[base])
        segments.add(seg)
    return bases


def remove_stray_snapshots(directory: Path, entries: list[os.DirEntry[str]],
                           log_end_offset: int) -> None:
    """Producer snapshots above the recovered log end describe data the log no longer has
    (a crash lost the tail): once replication refilled those offsets with other batches
    they would be read as the state there, so they go (Kafka's stray snapshot removal)."""
    for entry in entries:
        stem = entry.name[: -len(".snapshot")]
        if entry.name.endswith(".snapshot") and stem.isdigit() and int(stem) > log_end_offset:
            log.warning("%s: removing producer snapshot %d above the log end %d",
                        directory.name, int(stem), log_end_offset)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


def recover_segments(segments: LogSegments, recovery_point: int,
                     leader_epochs: LeaderEpochCache) -> bool:
    """Re-validate segments from the one holding `recovery_point`, cutting at damage; returns
    whether the leader-epoch cache changed (it is rebuilt from the batches' own epochs)."""
    segs = segments.segments
    start = segments.floor_index(recovery_point)
    expected = segs[start].base_offset
    # The leader-epoch checkpoint is written lazily; the batches themselves carry the
    # epoch, so the cache is rebuilt from them for everything being recovered.
    epochs_changed = leader_epochs.truncate_from_end(expected)
    i = start
    # Not max.message.bytes: it may have been lowered since valid larger batches were
    # written. The file size bounds every read; the CRC decides.
    max_batch = (1 << 31) + 12
    while i < len(segs):
        seg = segs[i]
        truncated, reason = seg.recover(expected, max_batch)
        if truncated:
            log.warning(
                "%s: truncated %d bytes at the end of %s (%s); dropping %d later segment(s)",
                segments.directory.name, truncated, seg.log_path.name, reason,
                len(segs) - i - 1,
            )
        if i + 1 < len(segs):
            seg.seal()
            seg.flush(fsync=False)
        seg.dirty = True  # the rebuilt indexes and any cut are synced by the next flush
        for epoch, offset in seg.recovered_epochs:
            epochs_changed |= leader_epochs.assign(epoch, offset)
        expected = seg.next_offset
        if truncated:
            _drop_segments_after(segments, i)
            break
        if i + 1 < len(segs) and segs[i + 1].base_offset < expected:
            log.warning("%s: segment %s overlaps its predecessor; dropping it and later ones",
                        segments.directory.name, segs[i + 1].log_path.name)
            _drop_segments_after(segments, i)
            break
        i += 1
    segs[-1].open_as_active()
    return epochs_changed


def _drop_segments_after(segments: LogSegments, i: int) -> None:
    """Delete every segment after segment `i`: what follows damage cannot be trusted to
    continue the log's offsets."""
    for later in segments.drop_after(i):
        later.close()
        later.unlink()
