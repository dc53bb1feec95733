"""Per-segment aborted-transaction index (`<base offset>.txnindex`) and producer snapshots.

Why these live in storage as plain file formats: the transaction layer
(`kafkapy.coordinator.idempotence`) decides *what* an aborted transaction or a producer-state
snapshot is; the log decides *where* it is kept, so it can delete, truncate and swap these files
together with the segments they describe (retention, follower truncation, cleaning).

`.txnindex`: Kafka's layout, fixed 34-byte entries: version i16 (0), producer id i64, first
offset i64, last offset i64 (the abort marker), last stable offset i64, big-endian, ordered by
last offset. A read_committed fetch asks for the entries overlapping its offset range so the
client can drop aborted records. A torn trailing entry (crash mid-append) is ignored on load.

`<20-digit offset>.snapshot`: opaque bytes (the coordinator's versioned, CRC-checked encoding)
of the producer state as of that offset, written atomically; the log keeps them in offset order
and drops those the log no longer covers.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import os
import struct
from pathlib import Path

from kafkapy.storage.checkpoint import write_atomic

__all__ = [
    "AbortedTxnEntry",
    "TransactionIndex",
    "delete_snapshots",
    "list_snapshots",
    "read_snapshot",
    "write_snapshot",
]

_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class AbortedTxnEntry:
    """An aborted transaction: offsets [first_offset, last_offset] of `producer_id` (the last
    one is the abort marker) and the LSO right after it."""

    last_offset: int
    producer_id: int
    first_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions whose abort marker is in one segment. Not thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxnEntry] | None = None

    @property
    def entries(self) -> list[AbortedTxnEntry]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxnEntry]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out: list[AbortedTxnEntry] = []
        whole = len(data) - len(data) % _ENTRY.size
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole]):
            if version != _VERSION or first > last or (out and last < out[-1].last_offset):
                break  # garbage from a crash: keep the valid prefix
            out.append(AbortedTxnEntry(last, pid, first, lso))
        return out

    def append(self, entry: AbortedTxnEntry) -> None:
        """Add an entry (markers arrive in offset order) and write it through."""
        entries = self.entries
        if entries and entry.last_offset < entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {entry.last_offset} is out of order")
        if entry.first_offset > entry.last_offset:
            raise ValueError("first offset after last offset")
        packed = _ENTRY.pack(_VERSION, entry.producer_id, entry.first_offset,
                             entry.last_offset, entry.last_stable_offset)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, packed)
        finally:
            os.close(fd)
        entries.append(entry)

    def restore(self, entry: AbortedTxnEntry) -> bool:
        """Add `entry` unless present (rebuilding the index from the log after a crash lost
        part of it); keeps offset order. Returns whether it was missing."""
        entries = self.entries
        if any(e.last_offset == entry.last_offset and e.producer_id == entry.producer_id
               for e in entries):
            return False  # the same abort marker (its LSO field may differ on a replay)
        if not entries or entry.last_offset >= entries[-1].last_offset:
            self.append(entry)
        else:
            self.rewrite(sorted([*entries, entry]))
        return True

    def overlapping(self, start: int, end: int) -> list[AbortedTxnEntry]:
        """Entries whose range meets [start, end): what a fetch of that range must report."""
        entries = self.entries
        i = bisect.bisect_left([e.last_offset for e in entries], start)
        return [e for e in entries[i:] if e.first_offset < end]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after `offset` (the log was cut there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.rewrite(kept)

    def rewrite(self, entries: list[AbortedTxnEntry]) -> None:
        data = b"".join(_ENTRY.pack(_VERSION, e.producer_id, e.first_offset, e.last_offset,
                                    e.last_stable_offset) for e in entries)
        if data:
            write_atomic(self.path, data, fsync=False)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self._entries = list(entries)


# --- producer-state snapshots ----------------------------------------------------------------
_SNAPSHOT_SUFFIX = ".snapshot"


def _snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{_SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[int]:
    """Offsets of the snapshot files present, ascending."""
    offsets = []
    for path in directory.glob(f"*{_SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(_SNAPSHOT_SUFFIX)]
        if stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def write_snapshot(directory: Path, offset: int, data: bytes, *, fsync: bool = True) -> None:
    """Store the producer state as of `offset` (atomic: old file or new, never torn)."""
    write_atomic(_snapshot_path(directory, offset), data, fsync=fsync)


def read_snapshot(directory: Path, at_or_below: int) -> tuple[int, bytes] | None:
    """The newest snapshot at or below `at_or_below` as (offset, bytes), or None. The caller
    decodes it and, if it is corrupt, deletes it and asks again."""
    offsets = [o for o in list_snapshots(directory) if o <= at_or_below]
    for offset in reversed(offsets):
        try:
            return offset, _snapshot_path(directory, offset).read_bytes()
        except FileNotFoundError:
            continue
    return None


def delete_snapshots(directory: Path, *, below: int | None = None,
                     above: int | None = None, keep_newest: bool = False) -> int:
    """Delete snapshots with offset < `below` and/or > `above`; returns how many.

    `keep_newest` (retention moving the log start): the newest snapshot below `below` survives
    when none is at or above it. Producer state is cumulative - a producer whose batches were
    all deleted is known only from such a snapshot - and the broker loads a partition's state
    lazily, so it may not have snapshotted since; replay then resumes at the log start.
    """
    offsets = list_snapshots(directory)
    kept: int | None = None
    if keep_newest and below is not None and not any(o >= below for o in offsets):
        kept = max((o for o in offsets if o < below), default=None)
    deleted = 0
    for offset in offsets:
        if offset == kept:
            continue
        if (below is not None and offset < below) or (above is not None and offset > above):
            with contextlib.suppress(FileNotFoundError):
                _snapshot_path(directory, offset).unlink()
                deleted += 1
    return deleted
