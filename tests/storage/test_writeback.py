"""Writeback pacing and checkpoint writes that keep appends off slow file work.

Users rely on: every appended byte is handed to the kernel's writeback once (so no gigabyte
of dirty pages is left for one burst), never a page an append is still filling, with no
change to what reads return; and a slow `offsets.checkpoint` write never holds up appends
nor leaves an older checkpoint on disk than a newer one written meanwhile.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkapy.storage.local_log as log_module
from kafkapy.storage import LogConfig, LogManager, PartitionLog
from kafkapy.storage.checkpoint import OffsetsCheckpoint
from kafkapy.storage.writeback import PAGE_SIZE, WRITEBACK_SUPPORTED, start_writeback
from tests.storage.helpers import BASE_TS, batch, read_all

pytestmark = pytest.mark.skipif(not WRITEBACK_SUPPORTED, reason="no sync_file_range here")


class Recorder:
    """Stands in for the syscall: remembers which byte ranges of which file were handed over."""

    def __init__(self) -> None:
        self.ranges: dict[str, list[tuple[int, int]]] = {}

    def __call__(self, fd: int, offset: int, nbytes: int) -> bool:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        self.ranges.setdefault(name, []).append((offset, offset + nbytes))
        return start_writeback(fd, offset, nbytes)

    def covered(self, name: str) -> int:
        """End of the contiguous run from 0; asserts ranges never overlap or leave gaps."""
        end = 0
        for start, stop in self.ranges.get(name, []):
            assert start == end, f"{name}: range {start}-{stop} after {end}"
            assert stop > start
            end = stop
        return end


def test_start_writeback_on_a_real_file_and_a_closed_fd(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    os.pwrite(fd, b"x" * 3 * PAGE_SIZE, 0)
    assert start_writeback(fd, 0, 3 * PAGE_SIZE) is True
    assert start_writeback(fd, 0, 0) is False
    os.close(fd)
    assert start_writeback(fd, 0, PAGE_SIZE) is False  # EBADF: nothing to do, no error


def test_each_byte_is_handed_over_once_and_the_open_page_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder()
    monkeypatch.setattr(log_module, "start_writeback", rec)
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=64 * 1024))
    value = b"v" * 1000
    plog.append(batch([value] * 3), now_ms=BASE_TS)
    # under min_bytes and not yet max_delay_ms since the last start: nothing
    assert plog.start_writeback(BASE_TS, min_bytes=1 << 20, max_delay_ms=5000) == 0
    assert rec.ranges == {}
    active = plog.segments[-1]
    started = plog.start_writeback(BASE_TS + 5000, min_bytes=1 << 20, max_delay_ms=5000)
    assert started == active.size - active.size % PAGE_SIZE
    for i in range(100):  # rolls several segments
        plog.append(batch([value] * 4), now_ms=BASE_TS + i)
        if i % 7 == 0:
            plog.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0)
    plog.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0)
    assert len(plog.segments) > 3
    for seg in plog.segments[:-1]:
        assert rec.covered(seg.log_path.name) == seg.size  # sealed: all of it
    active = plog.segments[-1]
    assert rec.covered(active.log_path.name) == active.size - active.size % PAGE_SIZE
    assert plog.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0) == 0  # nothing new
    assert [v for _, _, v in read_all(plog)] == [value] * 403
    plog.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 30)),
    st.tuples(st.just("writeback"), st.integers(0, 20_000)),
    st.tuples(st.just("truncate"), st.integers(0, 100)),
    st.tuples(st.just("roll"), st.just(0)),
), max_size=40))
def test_ranges_stay_inside_the_files_whatever_happens(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    """After appends, rolls and follower truncation, every range handed over lies inside the
    bytes of its segment as written at that moment, and reads are unaffected."""
    rec = Recorder()
    original = vars(log_module)["start_writeback"]
    setattr(log_module, "start_writeback", rec)  # noqa: B010 (hypothesis: no monkeypatch per example)
    try:
        plog = PartitionLog(tmp_path_factory.mktemp("wb") / "t-0", LogConfig(segment_bytes=16 * 1024))
        for op, arg in ops:
            if op == "append":
                plog.append(batch([b"x" * 200] * arg), now_ms=BASE_TS)
            elif op == "roll":
                plog.roll(BASE_TS)
            elif op == "truncate":
                plog.truncate_to(min(arg, plog.log_end_offset))
            else:
                rec.ranges.clear()
                plog.start_writeback(BASE_TS, min_bytes=arg, max_delay_ms=10**9)
                sizes = {s.log_path.name: s.size for s in plog.segments}
                for name, ranges in rec.ranges.items():
                    for start, stop in ranges:
                        assert 0 <= start < stop <= sizes[name]
        # a last call with no threshold covers every byte but the open page, cuts included
        plog.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0)
        for seg in plog.segments[:-1]:
            assert seg.written_back == seg.size or not seg.is_open
        active = plog.segments[-1]
        if active.is_open:  # (all of it when truncation made a sealed segment active again)
            assert active.size - active.size % PAGE_SIZE <= active.written_back <= active.size
        expected = plog.log_end_offset - plog.log_start_offset
        assert len(read_all(plog)) == expected
        plog.close()
    finally:
        setattr(log_module, "start_writeback", original)  # noqa: B010


def test_manager_paces_only_logs_with_enough_new_bytes(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "data"], LogConfig())
    try:
        busy = manager.get_or_create("busy", 0)
        quiet = manager.get_or_create("quiet", 0)
        for i in range(40):
            busy.append(batch([b"b" * 1000] * 40), now_ms=BASE_TS + i)
        quiet.append(batch([b"q" * 100]), now_ms=BASE_TS)
        started = manager.start_writeback(BASE_TS, min_bytes=1 << 20, max_delay_ms=5000)
        assert started >= busy.size_bytes - PAGE_SIZE
        assert started <= busy.size_bytes  # the quiet log's few bytes wait
        later = manager.start_writeback(BASE_TS + 5000, min_bytes=1 << 20, max_delay_ms=5000)
        assert 0 <= later < 2 * PAGE_SIZE  # only the open pages' whole part, if any
    finally:
        manager.close()


def test_logs_opened_from_disk_hand_over_nothing_old(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=8 * 1024))
    for i in range(30):
        plog.append(batch([b"o" * 500] * 2), now_ms=BASE_TS + i)
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=8 * 1024), clean_shutdown=True)
    assert reopened.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0) == 0
    reopened.close()


# --- checkpoint writes outside the log's lock ------------------------------------------------


@pytest.mark.timeout(30)
def test_slow_checkpoint_write_does_not_hold_up_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig())
    plog.append(batch([b"a"]), now_ms=BASE_TS)
    plog.high_watermark = plog.log_end_offset
    entered, release = threading.Event(), threading.Event()
    real_write = OffsetsCheckpoint.write

    def slow_write(self: OffsetsCheckpoint, directory: Path, *, fsync: bool) -> None:
        entered.set()
        release.wait(10)  # a rename stuck behind the kernel's writeback
        real_write(self, directory, fsync=fsync)

    monkeypatch.setattr(OffsetsCheckpoint, "write", slow_write)
    writer = threading.Thread(target=plog.checkpoint_offsets, kwargs={"force": True})
    writer.start()
    try:
        assert entered.wait(10)
        appender = threading.Thread(
            target=lambda: plog.append(batch([b"b"]), now_ms=BASE_TS))
        appender.start()
        appender.join(5)
        assert not appender.is_alive(), "append waited for the checkpoint file"
        assert plog.log_end_offset == 2
    finally:
        release.set()
        writer.join(10)
    assert not writer.is_alive()
    on_disk = OffsetsCheckpoint.read(plog.directory)
    assert on_disk is not None
    assert on_disk.high_watermark == 1
    plog.close()


def test_a_checkpoint_that_lost_the_race_never_replaces_a_newer_one(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig())
    plog.append(batch([b"a"] * 5), now_ms=BASE_TS)
    plog.high_watermark = 2
    with plog._lock:
        stale = plog._snapshot_checkpoint()
    plog.high_watermark = 5
    plog.checkpoint_offsets(force=True)  # the newer state lands first
    assert not plog._write_checkpoint_snapshot(*stale, fsync=False)
    on_disk = OffsetsCheckpoint.read(plog.directory)
    assert on_disk is not None
    assert on_disk.high_watermark == 5
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    assert reopened.high_watermark == 5
    reopened.close()


def test_no_checkpoint_is_written_into_a_deleted_log(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig())
    plog.append(batch([b"a"]), now_ms=BASE_TS)
    plog.high_watermark = 1
    with plog._lock:
        snapshot = plog._snapshot_checkpoint()
    plog.delete()
    assert not plog._write_checkpoint_snapshot(*snapshot, fsync=False)
    assert not (tmp_path / "t-0").exists()


def test_the_manager_passes_over_idle_logs_without_touching_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of idle partitions: a writeback pass only works on the logs written to since
    everything of theirs was handed over (or still holding bytes back), and misses none."""
    calls: list[str] = []
    original = PartitionLog.start_writeback

    def counted(self: PartitionLog, now_ms: int, *, min_bytes: int, max_delay_ms: int) -> int:
        calls.append(self.directory.name)
        return original(self, now_ms, min_bytes=min_bytes, max_delay_ms=max_delay_ms)

    monkeypatch.setattr(PartitionLog, "start_writeback", counted)
    manager = LogManager([tmp_path])
    logs = [manager.get_or_create("t", p, LogConfig(segment_bytes=64 * 1024)) for p in range(20)]
    for plog in logs:
        plog.append(batch([b"v" * 5000]), now_ms=BASE_TS)
    manager.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0)
    assert len(calls) == 20
    calls.clear()
    manager.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0)
    assert calls == []  # idle: not one log's lock taken
    rec = Recorder()  # from here on, only t-3's bytes are handed over
    monkeypatch.setattr(log_module, "start_writeback", rec)
    logs[3].append(batch([b"w" * 9000]), now_ms=BASE_TS)
    manager.start_writeback(BASE_TS, min_bytes=1 << 20, max_delay_ms=10_000)  # held back: not due
    manager.start_writeback(BASE_TS + 10_000, min_bytes=1 << 20, max_delay_ms=10_000)
    assert calls == ["t-3", "t-3"]
    active = logs[3].segments[-1]
    assert rec.ranges[active.log_path.name][-1][1] == active.size - active.size % PAGE_SIZE
    logs[5].truncate_to(0)
    logs[5].append(batch([b"v" * 5000]), now_ms=BASE_TS)  # the same end offset, after a cut
    calls.clear()
    manager.start_writeback(BASE_TS, min_bytes=0, max_delay_ms=0)
    assert calls == ["t-5"]
    manager.close()
