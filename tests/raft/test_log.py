"""`MemoryRaftLog` against a brute-force model (it is the log every simulation trusts)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.raft import Entry, MemoryRaftLog

epoch_runs = st.lists(st.integers(min_value=1, max_value=4), max_size=5).map(
    lambda steps: [sum(steps[: i + 1]) for i in range(len(steps))]
)


def _build(epochs: list[int], counts: list[int]) -> MemoryRaftLog:
    entries: list[Entry] = []
    for epoch, count in zip(epochs, counts, strict=False):
        entries += [
            Entry(len(entries) + i, epoch, b"%d" % (len(entries) + i)) for i in range(count)
        ]
    return MemoryRaftLog(entries)


@settings(max_examples=150)
@given(
    epoch_runs,
    st.lists(st.integers(min_value=1, max_value=4), min_size=5, max_size=5),
    st.integers(min_value=0, max_value=25),
)
def test_end_offset_for_epoch_matches_a_scan(
    epochs: list[int], counts: list[int], asked: int
) -> None:
    """(largest epoch <= asked, first offset of a later epoch or the log end), as
    OffsetForLeaderEpoch answers; (0, first offset) when no entry is that old."""
    log = _build(epochs, counts)
    entries = log.entries
    older = [e for e in entries if e.epoch <= asked]
    later = [e.offset for e in entries if e.epoch > asked]
    expected_epoch = max((e.epoch for e in older), default=0)
    expected_end = min(later, default=len(entries))
    assert log.end_offset_for_epoch(asked) == (expected_epoch, expected_end)
    assert log.last_epoch() == (entries[-1].epoch if entries else 0)


@settings(max_examples=100)
@given(
    epoch_runs,
    st.lists(st.integers(min_value=1, max_value=4), min_size=5, max_size=5),
    st.integers(min_value=0, max_value=25),
)
def test_truncate_keeps_prefix_and_epoch_table(
    epochs: list[int], counts: list[int], cut: int
) -> None:
    """Truncation keeps exactly the prefix, and the epoch table answers as if rebuilt."""
    log = _build(epochs, counts)
    before = log.entries
    log.truncate_to(cut)
    assert log.entries == before[:cut]
    rebuilt = MemoryRaftLog(before[:cut])
    for e in range(0, 25):
        assert log.end_offset_for_epoch(e) == rebuilt.end_offset_for_epoch(e)


def test_crash_keeps_only_what_was_flushed() -> None:
    """An unflushed append or truncation may be lost in a crash; a flushed one survives."""
    log = MemoryRaftLog([Entry(0, 1, b"a"), Entry(1, 1, b"b")])
    log.flush()
    log.append([Entry(2, 2, b"c")])
    assert log.crash().entries == [Entry(0, 1, b"a"), Entry(1, 1, b"b")]
    log.truncate_to(1)
    assert log.crash().end_offset() == 2  # the truncation was not flushed either
    log.flush()
    assert log.crash().entries == [Entry(0, 1, b"a")]


def test_append_rejects_gaps_and_epoch_regressions() -> None:
    """A gap or an older epoch is a driver bug: refused, the log unchanged."""
    log = MemoryRaftLog([Entry(0, 2, b"")])
    with pytest.raises(ValueError, match="log end"):
        log.append([Entry(2, 2, b"")])
    with pytest.raises(ValueError, match="epoch"):
        log.append([Entry(1, 1, b"")])
    assert log.read(0, 10) == [Entry(0, 2, b"")]
    assert log.epoch_at(0) == 2
    assert log.epoch_at(1) is None
