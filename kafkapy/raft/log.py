"""The Raft log seen by the core: entries with (offset, epoch), snapshots, and an in-memory
implementation.

The core never touches files: it talks to a `RaftLog`. The server supplies one over a
`PartitionLog` (`kafkapy.server.cluster.metadata_log`); simulations and unit tests use
`MemoryRaftLog`, which also models durability (what survives a crash is what was flushed), so a
simulated crash loses exactly the tail a real disk could lose.

Snapshots (KIP-630): a snapshot `(end offset, epoch)` stands for every entry below its end
offset, the last of them of that epoch; its bytes are opaque here (the state machine's). Once a
snapshot is adopted the log starts at its end offset: entries below are gone, and the snapshot
counts as the entry just before the start for `last_epoch`, `epoch_at` and
`end_offset_for_epoch`. The adoption rule, also used when a log is reopened: if the log holds
the entry at `end - 1` with the snapshot's epoch, the entries from `end` on are kept (log
matching: everything below agrees with the snapshot), as they are when the log already starts
at `end` (it adopted that snapshot before a restart); otherwise the whole log is dropped and
restarts empty at `end`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Entry", "MemoryRaftLog", "RaftLog", "SnapshotId"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. `data == b""` is the no-op a leader writes at the start of its epoch."""

    offset: int
    epoch: int
    data: bytes


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot of every entry below `end_offset`; the last of them has epoch `epoch`."""

    end_offset: int
    epoch: int


class RaftLog(Protocol):
    """What the core needs from a log (see the module doc for snapshots)."""

    def start_offset(self) -> int:
        """The first offset the log holds (the latest snapshot's end offset, else 0)."""
        ...

    def end_offset(self) -> int:
        """The offset the next appended entry gets (the log end offset)."""
        ...

    def last_epoch(self) -> int:
        """The epoch of the last entry (or of the snapshot when the log is empty), else 0."""
        ...

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the entry at `offset` (at `start - 1`: the snapshot's), else None."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, start offset of the next higher epoch or the log end).

        The OffsetForLeaderEpoch answer: when neither an entry nor the snapshot has an epoch
        <= `epoch`, (0, the log start offset) - the whole log diverges.
        """
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries whose offsets continue the log contiguously."""
        ...

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        """Up to `max_entries` entries from `offset` (empty at or past the end)."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or above `offset` (never below the start offset)."""
        ...

    def flush(self) -> None:
        """Make everything appended (and truncated) so far durable."""
        ...

    def latest_snapshot(self) -> SnapshotId | None:
        """The snapshot the log starts at, None before the first one."""
        ...

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        """(up to `max_bytes` of the snapshot from `position`, its total size); None when the
        log no longer (or never) had that snapshot or `position` is past its end."""
        ...

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Write a snapshot durably (it survives a crash from the moment this returns)."""
        ...

    def adopt_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Make a stored snapshot the latest and start the log at its end (module doc rule)."""
        ...


class MemoryRaftLog:
    """A `RaftLog` in a Python list, with a durable image for crash simulation.

    `flush()` copies the live entries to the durable image; `crash()` returns a new log holding
    only the durable image - so an append or a truncation not yet flushed may be lost, as on a
    real disk when fsync was skipped. A stored snapshot is durable at once (the server writes
    its file with fsync), and a restarted log adopts the newest one by the module doc's rule.
    Epoch starts are kept in a sorted side table, so `end_offset_for_epoch` is a bisect rather
    than a scan.
    """

    def __init__(
        self,
        entries: Sequence[Entry] = (),
        *,
        start: int = 0,
        snapshots: dict[SnapshotId, bytes] | None = None,
    ) -> None:
        self._start = start
        self._entries: list[Entry] = []
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset), both ascending
        self._snapshot: SnapshotId | None = None
        self._snapshots: dict[SnapshotId, bytes] = dict(snapshots or {})
        self.append(entries)
        self._durable: tuple[int, tuple[Entry, ...]] = (self._start, tuple(self._entries))
        if self._snapshots:
            self.adopt_snapshot(max(self._snapshots))

    @property
    def entries(self) -> list[Entry]:
        """A copy of the live entries (for assertions in tests)."""
        return list(self._entries)

    def start_offset(self) -> int:
        return self._start

    def end_offset(self) -> int:
        return self._start + len(self._entries)

    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self._snapshot.epoch if self._snapshot is not None else 0

    def epoch_at(self, offset: int) -> int | None:
        if self._start <= offset < self.end_offset():
            return self._entries[offset - self._start].epoch
        if self._snapshot is not None and offset == self._start - 1:
            return self._snapshot.epoch
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        # index of the first epoch start whose epoch is > `epoch`
        i = bisect.bisect_right(self._epoch_starts, (epoch, self.end_offset() + 1))
        end = self._epoch_starts[i][1] if i < len(self._epoch_starts) else self.end_offset()
        if i > 0:
            return (self._epoch_starts[i - 1][0], end)
        if self._snapshot is not None and self._snapshot.epoch <= epoch:
            return (self._snapshot.epoch, end)
        return (0, end)

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset():
                raise ValueError(f"append at {entry.offset}, log end is {self.end_offset()}")
            if entry.epoch < self.last_epoch():
                raise ValueError(f"epoch {entry.epoch} after epoch {self.last_epoch()}")
            if not self._epoch_starts or self._epoch_starts[-1][0] != entry.epoch:
                self._epoch_starts.append((entry.epoch, entry.offset))
            self._entries.append(entry)

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        if offset < self._start:
            raise ValueError(f"offset {offset} is below the log start {self._start}")
        i = offset - self._start
        return self._entries[i : i + max_entries]

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"truncation to {offset}, below the log start {self._start}")
        del self._entries[offset - self._start :]
        while self._epoch_starts and self._epoch_starts[-1][1] >= offset:
            self._epoch_starts.pop()

    def flush(self) -> None:
        self._durable = (self._start, tuple(self._entries))

    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshot

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        data = self._snapshots.get(snapshot_id)
        if data is None or not 0 <= position <= len(data):
            return None
        return data[position : position + max(1, max_bytes)], len(data)

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._snapshots[snapshot_id] = bytes(data)
        # keep the newest two: a fetcher part-way through the older one can finish it
        for old in sorted(self._snapshots)[:-2]:
            del self._snapshots[old]

    def adopt_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id not in self._snapshots:
            raise ValueError(f"snapshot {snapshot_id} was never stored")
        if self._snapshot is not None and snapshot_id <= self._snapshot:
            return
        end = snapshot_id.end_offset
        if end == self._start or (
            self.epoch_at(end - 1) == snapshot_id.epoch and end <= self.end_offset()
        ):
            del self._entries[: end - self._start]
        else:
            self._entries = []
        self._start = end
        self._snapshot = snapshot_id
        self._epoch_starts = []
        kept, self._entries = self._entries, []
        self.append(kept)

    def crash(self) -> MemoryRaftLog:
        """The log a restarted process would find: the entries as of the last `flush()` and
        every stored snapshot (the newest adopted again)."""
        start, entries = self._durable
        return MemoryRaftLog(entries, start=start, snapshots=self._snapshots)
