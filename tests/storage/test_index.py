"""Sparse indexes: lookups equal a linear search, files round-trip, truncation is exact."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.storage.index import OffsetIndex, TimeIndex

BASE = 1000


@st.composite
def entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    deltas = draw(st.lists(st.tuples(st.integers(1, 50), st.integers(61, 500)), max_size=40))
    out, offset, pos = [], BASE, 0
    for d_off, d_pos in deltas:
        out.append((offset, pos))
        offset += d_off
        pos += d_pos
    return out


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=entries(), probe=st.integers(BASE - 5, BASE + 2500))
def test_offset_index_lookup_equals_linear_search(tmp_path: Path, items: list[tuple[int, int]],
                                                  probe: int) -> None:
    index = OffsetIndex(tmp_path / "x.index", BASE)
    index.reset()  # also removes the previous example's file
    for offset, pos in items:
        index.append(offset, pos)
    index.flush(fsync=False)
    loaded = OffsetIndex(tmp_path / "x.index", BASE)
    assert loaded.load() or (not items and loaded.missing)  # an empty index writes no file
    for idx in (index, loaded):
        below = [e for e in items if e[0] <= probe]
        assert idx.lookup(probe) == (below[-1] if below else (BASE, 0))
        by_pos = [e for e in items if e[1] <= probe]
        assert idx.lookup_position(probe) == (by_pos[-1] if by_pos else (BASE, 0))
    loaded.truncate_keys_from(probe)
    assert list(zip(loaded.keys, loaded.values, strict=True)) == [e for e in items if e[0] < probe]
    again = OffsetIndex(tmp_path / "x.index", BASE)
    again.load()
    assert list(again.keys) == list(loaded.keys)


def test_index_files_with_garbage_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(b"\x00" * 7)  # not a whole entry
    assert not OffsetIndex(path, BASE).load()
    path.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x10" + b"\x00\x00\x00\x01\x00\x00\x00\x20")
    assert not OffsetIndex(path, BASE).load()  # offsets go backwards
    assert not OffsetIndex(tmp_path / "missing.index", BASE).load()


def test_time_index_keeps_only_new_maxima(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", BASE)
    index.reset()
    for ts, offset in ((100, BASE), (90, BASE + 1), (100, BASE + 2), (150, BASE + 3)):
        index.maybe_append(ts, offset)
    assert list(zip(index.keys, index.values, strict=True)) == [(100, BASE), (150, BASE + 3)]
    assert index.lookup_before(100) is None
    assert index.lookup_before(101) == BASE
    assert index.lookup_before(10**6) == BASE + 3
    assert index.max_timestamp == (150, BASE + 3)
    index.flush(fsync=False)
    loaded = TimeIndex(tmp_path / "x.timeindex", BASE)
    assert loaded.load()
    assert loaded.max_timestamp == (150, BASE + 3)
    loaded.truncate_to_offset(BASE + 3)
    assert loaded.max_timestamp == (100, BASE)
