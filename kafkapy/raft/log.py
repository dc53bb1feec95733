"""The Raft log seen by the core: entries with (offset, epoch), and an in-memory implementation.

The core never touches files: it talks to a `RaftLog`. The server supplies one over a
`PartitionLog` (`kafkapy.server.cluster.metadata_log`); simulations and unit tests use
`MemoryRaftLog`, which also models durability (what survives a crash is what was flushed), so a
simulated crash loses exactly the tail a real disk could lose.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Entry", "MemoryRaftLog", "RaftLog"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. `data == b""` is the no-op a leader writes at the start of its epoch."""

    offset: int
    epoch: int
    data: bytes


class RaftLog(Protocol):
    """What the core needs from a log (offsets start at 0; there are no snapshots yet)."""

    def end_offset(self) -> int:
        """The offset the next appended entry gets (the log end offset)."""
        ...

    def last_epoch(self) -> int:
        """The epoch of the last entry, 0 when the log is empty."""
        ...

    def epoch_at(self, offset: int) -> int | None:
        """The epoch of the entry at `offset`, None when there is no such entry."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, start offset of the next higher epoch or the log end).

        The OffsetForLeaderEpoch answer: when no entry has an epoch <= `epoch`, (0, offset of
        the first entry) - the whole log diverges.
        """
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries whose offsets continue the log contiguously."""
        ...

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        """Up to `max_entries` entries from `offset` (empty at or past the end)."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or above `offset`."""
        ...

    def flush(self) -> None:
        """Make everything appended (and truncated) so far durable."""
        ...


class MemoryRaftLog:
    """A `RaftLog` in a Python list, with a durable image for crash simulation.

    `flush()` copies the live entries to the durable image; `crash()` returns a new log holding
    only the durable image - so an append or a truncation not yet flushed may be lost, as on a
    real disk when fsync was skipped. Epoch starts are kept in a sorted side table, so
    `end_offset_for_epoch` is a bisect rather than a scan.
    """

    def __init__(self, entries: Sequence[Entry] = ()) -> None:
        self._entries: list[Entry] = []
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset), both ascending
        self.append(entries)
        self._durable: tuple[Entry, ...] = tuple(self._entries)

    @property
    def entries(self) -> list[Entry]:
        """A copy of the live entries (for assertions in tests)."""
        return list(self._entries)

    def end_offset(self) -> int:
        return len(self._entries)

    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else 0

    def epoch_at(self, offset: int) -> int | None:
        if 0 <= offset < len(self._entries):
            return self._entries[offset].epoch
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        # index of the first epoch start whose epoch is > `epoch`
        i = bisect.bisect_right(self._epoch_starts, (epoch, len(self._entries) + 1))
        end = self._epoch_starts[i][1] if i < len(self._epoch_starts) else len(self._entries)
        if i == 0:
            return (0, end)
        return (self._epoch_starts[i - 1][0], end)

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset != len(self._entries):
                raise ValueError(f"append at {entry.offset}, log end is {len(self._entries)}")
            if entry.epoch < self.last_epoch():
                raise ValueError(f"epoch {entry.epoch} after epoch {self.last_epoch()}")
            if not self._epoch_starts or self._epoch_starts[-1][0] != entry.epoch:
                self._epoch_starts.append((entry.epoch, entry.offset))
            self._entries.append(entry)

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        if offset < 0:
            raise ValueError(f"negative offset {offset}")
        return self._entries[offset : offset + max_entries]

    def truncate_to(self, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"negative offset {offset}")
        del self._entries[offset:]
        while self._epoch_starts and self._epoch_starts[-1][1] >= offset:
            self._epoch_starts.pop()

    def flush(self) -> None:
        self._durable = tuple(self._entries)

    def crash(self) -> MemoryRaftLog:
        """The log a restarted process would find: the state as of the last `flush()`."""
        return MemoryRaftLog(self._durable)
