"""`LogSegments`: the ordered segments of one local log and the lookups over them.

Kafka's `LogSegments`: a map from base offset to segment, nothing else. It knows no offsets
of the partition (log start, high watermark) and takes no lock: `LocalLog` owns it and calls
it under the log's lock. Kept apart so the offset and time lookups, and the invariant that
`bases` mirrors `segments`, sit in one small place that a remote tier's segment list can reuse.

`segments` and `bases` are plain lists kept side by side: the read path bisects `bases` on
every Fetch, so no per-call view or copy is built.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from pathlib import Path

from kafkapy.protocol.records import BatchHeader
from kafkapy.storage.segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    """The segments of a log in offset order; the last one is the active segment."""

    def __init__(self, directory: Path, *, index_interval_bytes: int) -> None:
        self.directory = directory
        self.index_interval_bytes = index_interval_bytes
        self.segments: list[LogSegment] = []
        self.bases: list[int] = []  # base offset of each segment, for bisecting

    def __len__(self) -> int:
        return len(self.segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.segments)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- lookups ------------------------------------------------------------------------------
    def floor_index(self, offset: int) -> int:
        """Index of the segment whose range holds `offset` (the first one for offsets below
        every base, as segments may start after a gap left by compaction)."""
        return max(0, bisect.bisect_right(self.bases, offset) - 1)

    def end_offset(self, i: int, log_end_offset: int) -> int:
        """First offset past segment `i`: the next segment's base, or the LEO for the last."""
        return self.bases[i + 1] if i + 1 < len(self.bases) else log_end_offset

    def locate(self, offset: int, limit: int) -> tuple[int, int, BatchHeader] | None:
        """(segment index, position, header) of the first batch with last offset >= `offset`
        and base offset < `limit`; segments may hold gaps (compaction) or be empty."""
        if offset >= limit:
            return None
        segments = self.segments
        i = max(0, bisect.bisect_right(self.bases, offset) - 1)
        while i < len(segments):
            hit = segments[i].find(offset)
            if hit is not None:
                pos, header = hit
                return (i, pos, header) if header.base_offset < limit else None
            i += 1
        return None

    def with_timestamp_at_least(self, timestamp: int) -> Iterator[LogSegment]:
        """Non-empty segments holding a record timestamped at or after `timestamp`, in offset
        order (ListOffsets by time): older segments are skipped by their largest timestamp."""
        for seg in self.segments:
            if seg.size and seg.largest_timestamp() >= timestamp:
                yield seg

    # --- changes ------------------------------------------------------------------------------
    def add(self, segment: LogSegment) -> None:
        """Append `segment` as the new active one; its base must follow the current bases."""
        if self.bases and segment.base_offset < self.bases[-1]:
            raise ValueError(f"segment {segment.base_offset} is below {self.bases[-1]}")
        self.segments.append(segment)
        self.bases.append(segment.base_offset)

    def create(self, base_offset: int, now_ms: int) -> LogSegment:
        """Create the files of a new empty segment at `base_offset` and add it."""
        seg = LogSegment.create(self.directory, base_offset,
                                index_interval_bytes=self.index_interval_bytes, now_ms=now_ms)
        self.add(seg)
        return seg

    def roll(self, base_offset: int, now_ms: int) -> LogSegment:
        """Seal the active segment (last index entries into the page cache) and start a new
        active one at `base_offset`, the next offset. OSError is left to the caller, which
        knows whether the log goes offline."""
        old = self.segments[-1]
        old.seal()
        old.flush(fsync=False)
        return self.create(base_offset, now_ms)

    def pop(self, i: int) -> LogSegment:
        """Take segment `i` out of the list (its files are the caller's business)."""
        self.bases.pop(i)
        return self.segments.pop(i)

    def drop_after(self, i: int) -> list[LogSegment]:
        """Take every segment after segment `i` out of the list and return them."""
        dropped = self.segments[i + 1 :]
        del self.segments[i + 1 :]
        del self.bases[i + 1 :]
        return dropped

    def replace(self, old: list[LogSegment], new: Iterable[LogSegment]) -> None:
        """Swap the contiguous run `old` for `new` (a compaction swap)."""
        i = self.segments.index(old[0])
        self.segments[i : i + len(old)] = list(new)
        self.bases[:] = [s.base_offset for s in self.segments]

    def set_index_interval(self, index_interval_bytes: int) -> None:
        """A config change: new and existing segments index at the new interval."""
        self.index_interval_bytes = index_interval_bytes
        for seg in self.segments:
            seg.index_interval_bytes = index_interval_bytes
