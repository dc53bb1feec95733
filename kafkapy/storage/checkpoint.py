"""Small per-partition state files, written atomically (temp file + rename).

Why rename: a crash mid-write must leave either the old or the new checkpoint, never a torn one,
and readers treat a checkpoint they cannot parse as absent (the log then falls back to the safe
choice: full recovery, log start at the first segment). Files in a partition directory:

- `offsets.checkpoint`: `log_start_offset`, `recovery_point`, `high_watermark`,
  `cleaner_offset` as `name value` lines under a version line. One file instead of Kafka's
  per-directory files so each log is self-contained and opening one log reads one file.
- `partition.metadata`: topic id and the topic-config overrides, written when the log is created
  or reconfigured.
- `leader-epoch-checkpoint`: `LeaderEpochCache`, Kafka's layout (version, count, `epoch offset`
  lines), for follower truncation (OffsetForLeaderEpoch) later.
- `remote-log-start-offset.checkpoint`: the log start a DeleteRecords below the local log start
  of a tiered topic set (KIP-405): the `__remote_log_metadata` replay cannot rebuild it, and a
  separate file keeps `offsets.checkpoint`'s format as older logs wrote it.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import os
import uuid
from pathlib import Path

__all__ = [
    "LeaderEpochCache",
    "OffsetsCheckpoint",
    "PartitionMetadata",
    "fsync_dir",
    "fsync_file",
    "read_remote_log_start",
    "write_atomic",
    "write_remote_log_start",
]

OFFSETS_FILE = "offsets.checkpoint"
METADATA_FILE = "partition.metadata"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
REMOTE_LOG_START_FILE = "remote-log-start-offset.checkpoint"


def fsync_dir(path: Path) -> None:
    """Make renames/creations inside `path` durable (POSIX needs an fsync of the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make an already written file's content durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, fsync: bool, sync_dir: bool = True) -> None:
    """Replace `path` with `data` so a crash leaves the old or the new content, never a mix.

    `fsync` makes the content durable before the rename; `sync_dir` also makes the rename
    itself durable (skippable where an older copy surviving a crash is harmless).
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync and sync_dir:
        fsync_dir(path.parent)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text("ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        return None


@dataclasses.dataclass(slots=True)
class OffsetsCheckpoint:
    """The offsets a partition log must remember across restarts."""

    log_start_offset: int = 0
    recovery_point: int = 0
    high_watermark: int = 0
    cleaner_offset: int = 0

    def write(self, directory: Path, *, fsync: bool) -> None:
        lines = ["version 0"] + [
            f"{f.name} {getattr(self, f.name)}" for f in dataclasses.fields(self)
        ]
        # An older checkpoint surviving a crash is safe (lower recovery point, log start and
        # high watermark), so the rename needs no directory fsync.
        write_atomic(directory / OFFSETS_FILE, ("\n".join(lines) + "\n").encode(),
                     fsync=fsync, sync_dir=False)

    @classmethod
    def read(cls, directory: Path) -> OffsetsCheckpoint | None:
        """The stored offsets, or None when missing or unreadable (caller recovers fully)."""
        text = _read_text(directory / OFFSETS_FILE)
        if text is None:
            return None
        lines = text.splitlines()
        if not lines or lines[0] != "version 0":
            return None
        values: dict[str, int] = {}
        names = {f.name for f in dataclasses.fields(cls)}
        for line in lines[1:]:
            name, _, raw = line.partition(" ")
            if name not in names:
                return None
            try:
                values[name] = int(raw)
            except ValueError:
                return None
        if set(values) != names or any(v < 0 for v in values.values()):
            return None
        return cls(**values)


def write_remote_log_start(directory: Path, offset: int) -> None:
    """Remember the remote log start DeleteRecords moved to `offset`, durably before the
    DeleteRecords answer: a restart must not make the deleted records readable again."""
    write_atomic(directory / REMOTE_LOG_START_FILE,
                 f"version 0\nremote_log_start_offset {offset}\n".encode(), fsync=True)


def read_remote_log_start(directory: Path) -> int:
    """The remote log start DeleteRecords set (`write_remote_log_start`); -1 when none, or the
    file is unreadable (the log start is then the first remote segment's, as before it moved)."""
    text = _read_text(directory / REMOTE_LOG_START_FILE)
    lines = text.splitlines() if text is not None else []
    if len(lines) != 2 or lines[0] != "version 0":
        return -1
    name, _, raw = lines[1].partition(" ")
    if name != "remote_log_start_offset" or not raw.isdigit():
        return -1
    return int(raw)


@dataclasses.dataclass(slots=True)
class PartitionMetadata:
    """Topic id and config overrides of one partition directory."""

    topic_id: uuid.UUID = dataclasses.field(default_factory=lambda: uuid.UUID(int=0))
    config_overrides: dict[str, str] = dataclasses.field(default_factory=dict)

    def write(self, directory: Path, *, fsync: bool) -> None:
        lines = ["version 0", f"topic_id {self.topic_id}"]
        lines += [f"config {k}={v}" for k, v in sorted(self.config_overrides.items())]
        write_atomic(directory / METADATA_FILE, ("\n".join(lines) + "\n").encode(), fsync=fsync)

    @classmethod
    def read(cls, directory: Path) -> PartitionMetadata | None:
        text = _read_text(directory / METADATA_FILE)
        if text is None:
            return None
        lines = text.splitlines()
        if not lines or lines[0] != "version 0":
            return None
        meta = cls()
        for line in lines[1:]:
            kind, _, rest = line.partition(" ")
            if kind == "topic_id":
                try:
                    meta.topic_id = uuid.UUID(rest)
                except ValueError:
                    return None
            elif kind == "config":
                key, _, value = rest.partition("=")
                meta.config_overrides[key] = value
        return meta


class LeaderEpochCache:
    """Leader epoch -> first offset written in that epoch (Kafka's leader-epoch-checkpoint).

    Why: a follower that comes back asks the leader "where did my last epoch end?"
    (OffsetForLeaderEpoch) and truncates to that offset instead of to its high watermark, which
    is what makes replication safe across leader changes (KIP-101). Entries are strictly
    increasing in both epoch and start offset. Not thread-safe: the owning log's lock guards it.
    """

    def __init__(self, directory: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self._path = directory / LEADER_EPOCH_FILE
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, offset in entries or []:
            self._epochs.append(epoch)
            self._offsets.append(offset)

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        """Read the checkpoint; a missing or damaged file yields an empty cache."""
        cache = cls(directory)
        text = _read_text(cache._path)
        if text is None:
            return cache
        lines = text.split("\n")
        try:
            if lines[0] != "0":
                return cache
            count = int(lines[1])
            entries = [tuple(map(int, line.split(" "))) for line in lines[2 : 2 + count]]
        except (IndexError, ValueError):
            return cache
        if len(entries) != count or any(len(e) != 2 for e in entries):
            return cache
        for epoch, offset in entries:
            if cache._epochs and (epoch <= cache._epochs[-1] or offset < cache._offsets[-1]):
                return cls(directory)
            cache._epochs.append(epoch)
            cache._offsets.append(offset)
        return cache

    def write(self, *, fsync: bool) -> None:
        lines = ["0", str(len(self._epochs))]
        lines += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
        write_atomic(self._path, ("\n".join(lines) + "\n").encode(), fsync=fsync,
                     sync_dir=False)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or -1 when nothing was written with an epoch yet."""
        return self._epochs[-1] if self._epochs else -1

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True when the cache changed.

        Older or equal epochs are ignored (only a new leader epoch opens an entry); an entry
        whose start offset would go backwards replaces the entries it contradicts.
        """
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        while self._offsets and self._offsets[-1] >= start_offset:
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, the offset where it ended): OffsetForLeaderEpoch.

        As Kafka's LeaderEpochFileCache: an empty cache answers (-1, -1); an epoch older than
        anything known answers (`epoch`, start offset of the first known epoch) - that data is
        gone from this log, so a follower asking must truncate to where this log's history
        begins (answering (-1, -1) there would leave it no truncation point at all).
        """
        if not self._epochs:
            return (-1, -1)
        i = bisect.bisect_right(self._epochs, epoch)
        if i == 0:
            return (epoch, self._offsets[0])
        if i == len(self._epochs):
            return (self._epochs[-1], log_end_offset)
        return (self._epochs[i - 1], self._offsets[i])

    def truncate_from_end(self, end_offset: int) -> bool:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        changed = False
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
            changed = True
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop epochs wholly before `start_offset`; the one spanning it now starts there."""
        i = bisect.bisect_right(self._offsets, start_offset)
        if i == 0:
            return False
        changed = i > 1 or self._offsets[0] != start_offset
        del self._epochs[: i - 1]
        del self._offsets[: i - 1]
        self._offsets[0] = start_offset
        return changed

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
