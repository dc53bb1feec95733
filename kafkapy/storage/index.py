"""Sparse indexes of a segment: offset -> file position and max timestamp -> offset.

Why sparse: one entry per `index.interval.bytes` of log keeps the index small enough to hold in
memory (a 1 GiB segment at the 4 KiB default is ~262k entries, 2 MiB) while bounding the scan
after the binary search to a few KiB. Layouts are Kafka's: `.index` entries are
(relative offset i32, position i32), `.timeindex` entries are (timestamp i64, relative offset
i32), big-endian. Entries live in `array`s; the file is appended lazily (`flush`) and never
fsynced: an unclean stop rebuilds the index of every segment past the recovery point anyway,
and for older segments `LogSegment.ensure_indexes` validates the file on first use (monotonic
entries, the last one pointing at a batch header with that offset) and rebuilds it from the log
if it is damaged. A short (stale) index only means a longer scan.

Not thread-safe: the owning `PartitionLog` lock guards every call.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from array import array
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex"]


class _SparseIndex:
    """Monotonic (key, value) pairs: keys strictly increase, values never decrease."""

    _fmt: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.keys: array[int] = array("q")
        self.values: array[int] = array("q")
        self._persisted = 0  # entries already in the file
        self._on_disk = False  # the file exists and holds our entries
        self.missing = False  # the last load() found no file
        self.loaded = False

    def __len__(self) -> int:
        return len(self.keys)

    # --- encoding hooks -------------------------------------------------------------------
    def _pack(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _unpack(self, a: int, b: int) -> tuple[int, int]:
        raise NotImplementedError

    # --- file -----------------------------------------------------------------------------
    def load(self) -> bool:
        """Read the file; False (and an empty index) when missing or inconsistent."""
        self.loaded = True
        self.keys, self.values, self._persisted = array("q"), array("q"), 0
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self.missing = True
            return False
        self.missing = False
        size = self._fmt.size
        if len(data) % size:
            return False
        keys, values = array("q"), array("q")
        for a, b in self._fmt.iter_unpack(data):
            key, value = self._unpack(a, b)
            if keys and (key <= keys[-1] or value < values[-1]):
                return False
            keys.append(key)
            values.append(value)
        self.keys, self.values, self._persisted = keys, values, len(keys)
        self._on_disk = True
        return True

    def ensure_loaded(self) -> None:
        if not self.loaded:
            self.load()

    def flush(self, *, fsync: bool) -> None:
        """Append entries not yet in the file (and fsync it when asked)."""
        pending = len(self.keys) - self._persisted
        if pending <= 0 and not fsync and (self._on_disk or not self.keys):
            return  # nothing new (an empty index needs no file: a missing one reads as empty)
        # A file not known to be ours (after reset) may hold stale entries: start it afresh.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if self._on_disk else os.O_TRUNC)
        fd = os.open(self.path, flags, 0o644)
        self._on_disk = True
        try:
            if pending > 0:
                chunk = b"".join(
                    self._pack(self.keys[i], self.values[i])
                    for i in range(self._persisted, len(self.keys))
                )
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
                self._persisted = len(self.keys)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def rewrite(self) -> None:
        """Replace the file with the in-memory entries (after a rebuild or truncation)."""
        data = b"".join(self._pack(k, v) for k, v in zip(self.keys, self.values, strict=True))
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)
        self._persisted = len(self.keys)
        self._on_disk = True

    def create_empty(self) -> None:
        """Start a new segment's index: an empty file on disk (Kafka creates both index files
        with the segment; entries are appended to it by `flush`)."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        self.keys, self.values = array("q"), array("q")
        self._persisted = 0
        self._on_disk = True
        self.missing = False
        self.loaded = True

    def reset(self) -> None:
        """Forget every entry and remove the file (before a rebuild or recovery)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.keys, self.values = array("q"), array("q")
        self._persisted = 0
        self._on_disk = False
        self.loaded = True

    # --- queries --------------------------------------------------------------------------
    def append(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)

    def floor(self, key: int) -> int:
        """Index of the last entry whose key is <= `key`, or -1."""
        return bisect.bisect_right(self.keys, key) - 1

    def truncate_keys_from(self, key: int) -> None:
        """Drop entries with key >= `key`; the file is rewritten if it held them."""
        i = bisect.bisect_left(self.keys, key)
        self._truncate(i)

    def _truncate(self, i: int) -> None:
        if i >= len(self.keys):
            return
        del self.keys[i:]
        del self.values[i:]
        if self._persisted > i:
            self._persisted = i
            try:
                os.truncate(self.path, i * self._fmt.size)
            except FileNotFoundError:
                self._persisted = 0


class OffsetIndex(_SparseIndex):
    """Batch base offset -> byte position of that batch in the segment."""

    _fmt = struct.Struct(">iI")

    def _pack(self, key: int, value: int) -> bytes:
        return self._fmt.pack(key - self.base_offset, value)

    def _unpack(self, a: int, b: int) -> tuple[int, int]:
        return a + self.base_offset, b

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last indexed batch starting at or before `offset`."""
        i = self.floor(offset)
        if i < 0:
            return self.base_offset, 0
        return self.keys[i], self.values[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last indexed batch starting at or before `position`."""
        i = bisect.bisect_right(self.values, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.keys[i], self.values[i]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or beyond `position` (the segment was cut there)."""
        self._truncate(bisect.bisect_left(self.values, position))


class TimeIndex(_SparseIndex):
    """Largest timestamp so far -> offset of the batch that carried it."""

    _fmt = struct.Struct(">qi")

    def _pack(self, key: int, value: int) -> bytes:
        return self._fmt.pack(key, value - self.base_offset)

    def _unpack(self, a: int, b: int) -> tuple[int, int]:
        return a, b + self.base_offset

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry only when `timestamp` is a new maximum (keys must strictly increase)."""
        if not self.keys or timestamp > self.keys[-1]:
            self.append(timestamp, offset)

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is strictly below `timestamp`.

        Every batch before that offset has a smaller max timestamp, so the first batch with
        max timestamp >= `timestamp` lies at or after it.
        """
        i = bisect.bisect_left(self.keys, timestamp) - 1
        return self.values[i] if i >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for batches at or after `offset`."""
        self._truncate(bisect.bisect_left(self.values, offset))

    @property
    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the newest entry, the segment's max when it was sealed."""
        if not self.keys:
            return None
        return self.keys[-1], self.values[-1]
