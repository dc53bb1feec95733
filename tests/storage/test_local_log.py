"""`LocalLog`: the segments in a partition's directory, without the partition's offsets.

What `PartitionLog` relies on: truncation cuts at a batch boundary, drops later segments and
bumps the truncation count; a full truncation restarts at the given offset; retention counts
the leading segments its config wants gone without touching the active one or anything past
the bound it is given, and deleting them keeps slices handed out earlier readable until the
fds are reaped.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.storage import LogConfig
from kafkapy.storage.local_log import LocalLog
from kafkapy.storage.results import FileSlice
from kafkapy.storage.segment import parse_append_input
from tests.storage.helpers import BASE_TS, offset_batch


def open_local(directory: Path, config: LogConfig, failures: list[str] | None = None) -> LocalLog:
    """An empty local log at offset 0, as `PartitionLog` opens a brand-new one."""
    directory.mkdir(parents=True, exist_ok=True)
    sink = failures if failures is not None else []
    local = LocalLog(directory, config, threading.RLock(), sink.append, now_ms=BASE_TS)
    local.segments.create(0, BASE_TS)
    return local


def append(local: LocalLog, count: int, *, ts: int = BASE_TS) -> None:
    data = offset_batch(local.log_end_offset, count, ts=ts)
    local.append(data, parse_append_input(data, 1 << 20), BASE_TS)


def filled(directory: Path, config: LogConfig, batches: int, per_segment: int) -> LocalLog:
    """`batches` two-record batches, timestamps one second apart, `per_segment` per segment."""
    local = open_local(directory, config)
    for i in range(batches):
        if i and i % per_segment == 0:
            local.roll(local.log_end_offset, BASE_TS)
        append(local, 2, ts=BASE_TS + 1000 * i)
    return local


def test_truncate_to_cuts_at_a_batch_boundary_and_drops_later_segments(tmp_path: Path) -> None:
    local = filled(tmp_path / "t-0", LogConfig(), batches=6, per_segment=2)  # bases 0, 4, 8
    local.recovery_point = 12
    end = local.truncate_to(5)  # inside the batch 4-5: it goes whole
    assert end == 4
    assert local.segments.bases == [0, 4]
    assert local.truncations == 1
    local.after_truncation(end)
    assert (local.log_end_offset, local.recovery_point) == (4, 4)
    append(local, 1)
    assert local.log_end_offset == 5
    local.close()


def test_truncate_fully_restarts_empty_at_the_offset(tmp_path: Path) -> None:
    local = filled(tmp_path / "t-0", LogConfig(), batches=4, per_segment=2)
    local.truncate_fully(100, BASE_TS)
    local.after_truncation(100)
    assert local.segments.bases == [100]
    assert local.log_end_offset == 100
    assert local.segments.active.size == 0
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [
        "00000000000000000100.log"]
    append(local, 3)
    assert local.log_end_offset == 103
    local.close()


def test_deleted_segments_stay_readable_until_reaped(tmp_path: Path) -> None:
    local = filled(tmp_path / "t-0", LogConfig(file_delete_delay_ms=60_000), 4, 2)
    slices: list[FileSlice] = []
    assert local.read_into(0, 1 << 20, local.log_end_offset, slices) == 0
    before = slices[0].read()
    assert local.delete_below(4) == 1
    assert local.segments.bases == [4]
    assert slices[0].read() == before  # unlinked, fd parked
    local.reap_retired()
    assert slices[0].read() == before  # the delay has not passed
    local.close()  # reaps every parked fd


def test_retention_counts_but_never_the_active_segment_nor_past_the_bound(
    tmp_path: Path,
) -> None:
    config = LogConfig(retention_ms=1500)
    local = filled(tmp_path / "t-0", config, batches=6, per_segment=2)  # bases 0, 4, 8
    now = BASE_TS + 1000 * 5 + 1
    # by age every sealed segment is due; the active one (8..11) never is
    assert local.retention_breaches(now, upper=12) == 2
    assert local.retention_breaches(now, upper=7) == 1  # the second ends at 8 > 7
    assert local.retention_breaches(now + 10**9, upper=12) == 2
    assert local.segments.bases == [0, 4, 8]  # counting deletes nothing
    local.config = LogConfig(retention_ms=1500, cleanup_policy="compact")
    assert local.retention_breaches(now, upper=12) == 0
    local.close()


def test_retention_by_bytes_leaves_at_most_the_limit(tmp_path: Path) -> None:
    local = filled(tmp_path / "t-0", LogConfig(retention_ms=-1), batches=6, per_segment=2)
    seg_size = local.segments.segments[0].size
    local.config = LogConfig(retention_ms=-1, retention_bytes=seg_size * 2)
    assert local.retention_breaches(BASE_TS, upper=12) == 1
    local.config = LogConfig(retention_ms=-1, retention_bytes=0)
    assert local.retention_breaches(BASE_TS, upper=12) == 2
    local.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    per_segment=st.integers(1, 3),
    batches=st.integers(1, 9),
    retention_ms=st.integers(-1, 9000),
    retention_segments=st.integers(-1, 4),
    upper=st.integers(0, 20),
    age=st.integers(0, 12_000),
)
def test_retention_breaches_match_kafkas_rules(
    per_segment: int, batches: int, retention_ms: int, retention_segments: int,
    upper: int, age: int,
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kafkapy-local-"))
    local = filled(tmp / "t-0", LogConfig(retention_ms=-1), batches, per_segment)
    try:
        segs = local.segments.segments
        size = segs[0].size
        retention_bytes = -1 if retention_segments < 0 else retention_segments * size
        local.config = LogConfig(retention_ms=retention_ms, retention_bytes=retention_bytes)
        now = BASE_TS + age
        # the model: oldest first, a segment goes while it is not the active one, ends at or
        # below `upper`, and is too old or (after the old ones) leaves enough bytes behind
        n = 0
        while (retention_ms >= 0 and n + 1 < len(segs) and segs[n + 1].base_offset <= upper
               and now - segs[n].largest_timestamp() > retention_ms):
            n += 1
        if retention_bytes >= 0:
            while (n + 1 < len(segs) and segs[n + 1].base_offset <= upper
                   and sum(s.size for s in segs[n + 1 :]) >= retention_bytes):
                n += 1
        assert local.retention_breaches(now, upper) == n
    finally:
        local.close()
        shutil.rmtree(tmp, ignore_errors=True)
