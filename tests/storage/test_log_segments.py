"""`LogSegments`: the ordered segments of a local log and the lookups over them.

What the log relies on: `bases` always mirrors `segments`; `floor_index` names the segment
whose range holds an offset; `locate` finds the first batch ending at or after an offset and
starting below a limit, across empty segments and gaps; `roll` seals the active segment and
starts the next one at the offset given.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.storage.log_segments import LogSegments
from kafkapy.storage.segment import parse_append_input
from tests.storage.helpers import BASE_TS, offset_batch


def write(segments: LogSegments, base_offset: int, count: int, *, ts: int = BASE_TS) -> None:
    data = offset_batch(base_offset, count, ts=ts)
    segments.active.append(memoryview(data), parse_append_input(data, 1 << 20))


def close_all(segments: LogSegments) -> None:
    for seg in segments:
        seg.close()


def test_roll_seals_the_active_segment_and_starts_the_next_at_the_given_offset(
    tmp_path: Path,
) -> None:
    segments = LogSegments(tmp_path, index_interval_bytes=64)
    segments.create(0, BASE_TS)
    write(segments, 0, 3)
    rolled = segments.roll(3, BASE_TS)
    assert segments.active is rolled
    assert segments.bases == [0, 3] == [s.base_offset for s in segments]
    assert (tmp_path / "00000000000000000003.log").exists()
    write(segments, 3, 2)
    assert segments.segments[0].next_offset == 3
    assert segments.active.next_offset == 5
    with pytest.raises(ValueError, match="below"):
        segments.add(segments.segments[0])  # a base below the active one breaks the order
    close_all(segments)


def test_lookups_by_offset_across_an_empty_segment_and_a_gap(tmp_path: Path) -> None:
    segments = LogSegments(tmp_path, index_interval_bytes=64)
    segments.create(0, BASE_TS)
    write(segments, 0, 5)          # offsets 0-4
    segments.roll(5, BASE_TS)      # left empty
    segments.roll(10, BASE_TS)
    write(segments, 12, 3)         # offsets 12-14, after a gap (compaction)
    assert [segments.floor_index(o) for o in (0, 4, 5, 9, 10, 14, 99)] == [0, 0, 1, 1, 2, 2, 2]
    assert segments.end_offset(0, 15) == 5
    assert segments.end_offset(2, 15) == 15
    found = segments.locate(6, 15)
    assert found is not None
    assert found[0] == 2
    assert found[2].base_offset == 12
    assert segments.locate(3, 15) is not None
    assert segments.locate(6, 12) is None   # the next batch starts at the limit
    assert segments.locate(15, 15) is None
    close_all(segments)


def test_lookup_by_time_skips_segments_older_than_the_timestamp(tmp_path: Path) -> None:
    segments = LogSegments(tmp_path, index_interval_bytes=64)
    segments.create(0, BASE_TS)
    write(segments, 0, 2, ts=BASE_TS)
    segments.roll(2, BASE_TS)
    write(segments, 2, 2, ts=BASE_TS + 1000)
    segments.roll(4, BASE_TS)  # empty active segment
    found = [s.base_offset for s in segments.with_timestamp_at_least(BASE_TS + 500)]
    assert found == [2]
    assert [s.base_offset for s in segments.with_timestamp_at_least(0)] == [0, 2]
    close_all(segments)


def test_pop_drop_after_and_replace_keep_bases_in_step(tmp_path: Path) -> None:
    segments = LogSegments(tmp_path, index_interval_bytes=64)
    segments.create(0, BASE_TS)
    for base in (10, 20, 30, 40):
        segments.roll(base, BASE_TS)
    bases = segments.bases
    first = segments.pop(0)
    assert segments.bases == [10, 20, 30, 40]
    dropped = segments.drop_after(1)
    assert [s.base_offset for s in dropped] == [30, 40]
    assert segments.bases == [10, 20]
    old = segments.segments[:1]
    segments.replace(old, [first])
    assert segments.bases == [0, 20] == [s.base_offset for s in segments]
    assert segments.bases is bases  # the read path may hold on to the list
    for seg in [*old, *dropped]:
        seg.close()
    close_all(segments)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3), st.booleans()),
                  min_size=1, max_size=12),
    probes=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 80)), max_size=20),
)
def test_locate_agrees_with_a_linear_scan(
    plan: list[tuple[int, int, bool]], probes: list[tuple[int, int]]
) -> None:
    """Batches of `count` records after a gap of `skip` offsets, rolling before some."""
    tmp = Path(tempfile.mkdtemp(prefix="kafkapy-segments-"))
    segments = LogSegments(tmp, index_interval_bytes=32)
    segments.create(0, BASE_TS)
    batches: list[tuple[int, int, int]] = []  # (segment index, base, last)
    next_offset = 0
    try:
        for count, skip, roll in plan:
            base = next_offset + skip
            if roll and segments.active.size:
                segments.roll(base, BASE_TS)
            write(segments, base, count)
            batches.append((len(segments) - 1, base, base + count - 1))
            next_offset = base + count
        assert segments.bases == [s.base_offset for s in segments]
        for offset, limit in probes:
            expected = next(((i, base) for i, base, last in batches
                             if last >= offset and offset < limit), None)
            if expected is not None and expected[1] >= limit:
                expected = None
            found = segments.locate(offset, limit)
            assert (None if found is None else (found[0], found[2].base_offset)) == expected
            i = segments.floor_index(offset)
            assert segments.bases[i] <= offset or i == 0
            assert i + 1 == len(segments) or segments.bases[i + 1] > offset
    finally:
        close_all(segments)
        shutil.rmtree(tmp, ignore_errors=True)
