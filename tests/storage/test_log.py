"""PartitionLog behaviour the server relies on: offsets, reads, errors, retention, truncation."""

from __future__ import annotations

import errno
import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    ProtocolError,
    RecordValidationError,
)
from kafkapy.protocol.records import (
    Compression,
    Record,
    build_batch,
    build_control_batch,
    iter_batches,
    validate_batch,
)
from kafkapy.storage import (
    KafkaStorageError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    StorageError,
)
from kafkapy.storage import segment as segment_module
from tests.storage.helpers import BASE_TS, batch, batch_offsets, records_of

pytestmark = pytest.mark.timeout(60)

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)


def fill(plog: PartitionLog, n: int, per_batch: int = 2, ts_step: int = 1) -> list[bytes]:
    values = []
    for i in range(n):
        vals = [b"v%04d-%d" % (i, j) for j in range(per_batch)]
        values += vals
        plog.append(batch(vals, ts=BASE_TS + i * ts_step), now_ms=BASE_TS + i * ts_step)
    return values


def all_values(plog: PartitionLog, start: int | None = None) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = plog.log_start_offset if start is None else start
    for _ in range(100_000):
        if offset >= plog.log_end_offset:
            break
        data = plog.read_bytes(offset, 4096)
        recs = records_of(data)
        out += [v for o, _, v in recs if o >= offset]
        offset = recs[-1][0] + 1
    return out


def test_append_assigns_consecutive_offsets_and_read_returns_them(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    r1 = plog.append(batch([b"a", b"b", b"c"]), now_ms=BASE_TS)
    r2 = plog.append(batch([b"d"]) + batch([b"e", b"f"]), now_ms=BASE_TS)
    assert (r1.base_offset, r1.last_offset, r1.batches) == (0, 2, 1)
    assert (r2.base_offset, r2.last_offset, r2.batches) == (3, 5, 2)
    assert r1.log_append_time_ms == -1
    assert r2.log_start_offset == 0
    assert plog.log_end_offset == 6
    assert [v for _, _, v in records_of(plog.read_bytes(0, 1 << 20))] == [
        b"a", b"b", b"c", b"d", b"e", b"f"]
    # an offset inside a batch returns that whole batch
    assert batch_offsets(plog.read_bytes(4, 1)) == [(4, 5)]


def test_read_returns_whole_batches_and_at_least_one(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(index_interval_bytes=64))
    fill(plog, 40)
    one = len(batch([b"v0000-0", b"v0000-1"]))
    result = plog.read(0, 1)  # KIP-74: smaller than a batch still returns one batch
    assert result.size == one
    assert result.first_offset == 0
    for max_bytes in (one, one + 1, 3 * one - 1, 10 * one + 5, 1000):
        data = plog.read_bytes(6, max_bytes)
        assert len(data) <= max(max_bytes, one)
        assert len(data) // one == max(1, max_bytes // one)
        assert batch_offsets(data)[0] == (6, 7)
        assert sum(1 for _ in iter_batches(data)) * one == len(data)


def test_read_slices_are_sendfile_ready(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 5)
    result = plog.read(2, 1 << 20)
    assert len(result.slices) == 1
    s = result.slices[0]
    assert os.pread(s.fd, s.length, s.position) == plog.read_bytes(2, 1 << 20)
    assert result.log_end_offset == 10
    assert result.high_watermark == 0


def test_max_offset_hides_batches_at_or_past_it(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 10)
    assert batch_offsets(plog.read_bytes(0, 1 << 20, max_offset=6)) == [(0, 1), (2, 3), (4, 5)]
    empty = plog.read(6, 1 << 20, max_offset=6)
    assert empty.slices == []
    assert empty.first_offset == -1


def test_read_outside_the_log_is_offset_out_of_range(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 3)
    assert plog.read(6, 100).slices == []  # the log end offset itself is a valid empty read
    with pytest.raises(OffsetOutOfRangeError) as info:
        plog.read(7, 100)
    assert info.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert info.value.log_end_offset == 6
    plog.high_watermark = 6
    plog.delete_records_before(4)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(3, 100)


def test_reads_cross_segments_after_rolls(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    values = fill(plog, 60)
    assert len(plog.segments) > 3
    assert all_values(plog) == values
    for offset in range(0, 120, 7):
        assert records_of(plog.read_bytes(offset, 1))[-1][0] >= offset


def test_corrupt_batch_is_rejected_and_nothing_written(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    good = batch([b"x"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as info:
        plog.append(good + bytes(bad), now_ms=BASE_TS)
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(CorruptRecordError):
        plog.append(good[:-3], now_ms=BASE_TS)
    with pytest.raises(InvalidRecordError):
        plog.append(b"", now_ms=BASE_TS)
    assert plog.log_end_offset == 0
    assert plog.size_bytes == 0


def test_oversized_batch_is_message_too_large(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError) as info:
        plog.append(batch([b"x" * 300]), now_ms=BASE_TS)
    assert info.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert plog.log_end_offset == 0


def test_clients_may_not_append_control_batches(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    marker = build_control_batch(True, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                 timestamp_ms=BASE_TS)
    with pytest.raises(InvalidRecordError):
        plog.append(marker, now_ms=BASE_TS)
    assert plog.append(marker, now_ms=BASE_TS, from_client=False).base_offset == 0


def test_log_append_time_stamps_batches(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    result = plog.append(batch([b"a", b"b"], ts=5), now_ms=BASE_TS + 42)
    assert result.log_append_time_ms == BASE_TS + 42
    header = next(iter_batches(plog.read_bytes(0, 100)))[1]
    assert header.timestamp_type == 1
    assert header.max_timestamp == BASE_TS + 42
    assert plog.offset_for_timestamp(BASE_TS) == (0, BASE_TS + 42)


def test_leader_epoch_is_stamped_and_cached(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    plog.append(batch([b"a"]), now_ms=BASE_TS, leader_epoch=3)
    plog.append(batch([b"b"]), now_ms=BASE_TS, leader_epoch=5)
    headers = [h for _, h in iter_batches(plog.read_bytes(0, 1000))]
    assert [h.partition_leader_epoch for h in headers] == [3, 5]
    assert plog.leader_epochs.entries == [(3, 0), (5, 1)]
    assert plog.leader_epochs.end_offset_for(4, plog.log_end_offset) == (3, 1)


def test_offset_for_timestamp_finds_first_record_at_or_after(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 50, per_batch=2, ts_step=10)  # batch i: records at BASE_TS+10i, +10i+1
    assert len(plog.segments) > 2
    assert plog.offset_for_timestamp(0) == (0, BASE_TS)
    assert plog.offset_for_timestamp(BASE_TS + 1) == (1, BASE_TS + 1)
    assert plog.offset_for_timestamp(BASE_TS + 2) == (2, BASE_TS + 10)
    assert plog.offset_for_timestamp(BASE_TS + 255) == (52, BASE_TS + 260)
    assert plog.offset_for_timestamp(BASE_TS + 491) == (99, BASE_TS + 491)
    assert plog.offset_for_timestamp(BASE_TS + 492) is None


def test_segment_rolls_by_size_and_time(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=10_000, segment_ms=1000))
    plog.append(batch([b"a"]), now_ms=BASE_TS)
    plog.append(batch([b"b"], ts=BASE_TS + 999), now_ms=BASE_TS + 5000)
    # old timestamps arriving late (a replay) do not roll: record time decides, as in Kafka
    plog.append(batch([b"old"], ts=BASE_TS - 10**6), now_ms=BASE_TS + 10**7)
    assert len(plog.segments) == 1
    plog.append(batch([b"c"], ts=BASE_TS + 1000), now_ms=BASE_TS + 1000)
    assert [s.base_offset for s in plog.segments] == [0, 3]
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names == ["00000000000000000000.log", "00000000000000000003.log"]


def test_retention_by_time_and_size_keeps_the_active_segment(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, retention_ms=1000, index_interval_bytes=128)
    plog = PartitionLog(tmp_path / "t-0", cfg)
    fill(plog, 40, ts_step=100)  # timestamps BASE_TS .. BASE_TS+3900
    assert plog.delete_old_segments(BASE_TS + 10**9) == 0  # nothing below the high watermark
    plog.high_watermark = plog.log_end_offset
    segs = len(plog.segments)
    assert plog.delete_old_segments(BASE_TS + 1000) == 0
    deleted = plog.delete_old_segments(BASE_TS + 3000)
    assert 0 < deleted < segs
    assert plog.log_start_offset == plog.segments[0].base_offset
    assert all(s.largest_timestamp() >= BASE_TS + 2000 for s in plog.segments[:-1])
    # far future: everything but the active segment goes
    plog.delete_old_segments(BASE_TS + 10**9)
    assert len(plog.segments) == 1
    assert plog.log_end_offset == 80
    assert plog.log_start_offset == plog.segments[0].base_offset
    assert all_values(plog)[-1] == b"v0039-1"

    by_size = PartitionLog(tmp_path / "t-1", LogConfig(segment_bytes=1024, retention_bytes=2048))
    fill(by_size, 60)
    by_size.high_watermark = by_size.log_end_offset
    by_size.delete_old_segments(BASE_TS)
    assert by_size.size_bytes <= 2048 + 1024
    assert by_size.size_bytes > 2048 - 1024
    assert all_values(by_size)[-1] == b"v0059-1"


def test_retired_segment_fd_stays_readable_until_reaped(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=1024, retention_ms=0,
                                                    file_delete_delay_ms=60_000))
    fill(plog, 40)
    plog.high_watermark = plog.log_end_offset
    first = plog.read(0, 100)
    expected = first.slices[0].read()
    assert plog.delete_old_segments(BASE_TS + 10**6) > 0
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    assert first.slices[0].read() == expected  # the fd still serves the old bytes
    plog.reap_retired(force=True)
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(first.slices[0].fd)


def test_delete_records_advances_log_start(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 40)
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(5)  # beyond the high watermark (0)
    plog.high_watermark = 80
    assert plog.delete_records_before(51) == 51
    assert plog.delete_records_before(10) == 51  # never moves back
    assert plog.segments[0].base_offset <= 51 < (plog.segments[1].base_offset
                                                 if len(plog.segments) > 1 else 10**9)
    assert records_of(plog.read_bytes(51, 1))[-1][0] == 51
    plog.close()
    again = PartitionLog(tmp_path / "t-0", SMALL, clean_shutdown=True)
    assert again.log_start_offset == 51
    assert again.high_watermark == 80


def test_truncate_to_and_truncate_fully(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    values = fill(plog, 40)
    plog.high_watermark = 80
    plog.truncate_to(33)  # inside batch (32, 33): the whole batch goes
    assert plog.log_end_offset == 32
    assert plog.high_watermark == 32
    assert all_values(plog) == values[:32]
    r = plog.append(batch([b"new"]), now_ms=BASE_TS)
    assert r.base_offset == 32
    plog.truncate_fully(500)
    assert (plog.log_start_offset, plog.log_end_offset) == (500, 500)
    assert plog.append(batch([b"z"]), now_ms=BASE_TS).base_offset == 500
    plog.close()
    again = PartitionLog(tmp_path / "t-0", SMALL, clean_shutdown=False)
    assert (again.log_start_offset, again.log_end_offset) == (500, 501)


def test_append_as_follower_keeps_offsets(tmp_path: Path) -> None:
    leader = PartitionLog(tmp_path / "l-0", SMALL)
    fill(leader, 10)
    follower = PartitionLog(tmp_path / "f-0", SMALL)
    data = leader.read_bytes(0, 1 << 20)
    result = follower.append_as_follower(data)
    assert (result.base_offset, result.last_offset) == (0, 19)
    assert follower.read_bytes(0, 1 << 20) == data
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(leader.read_bytes(4, 10))


def test_full_disk_fails_append_without_leaving_a_partial_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 3)
    before = plog.size_bytes
    real = os.pwrite

    def half_then_enospc(fd: int, data: memoryview, pos: int) -> int:
        if len(data) > 8:
            real(fd, data[: len(data) // 2], pos)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", half_then_enospc)
    with pytest.raises(KafkaStorageError) as info:
        plog.append(batch([b"x" * 100]), now_ms=BASE_TS)
    assert info.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.setattr(os, "pwrite", real)
    assert plog.size_bytes == before
    assert os.path.getsize(plog.segments[-1].log_path) == before
    assert plog.append(batch([b"ok"]), now_ms=BASE_TS).base_offset == 6
    plog.close()
    again = PartitionLog(tmp_path / "t-0", SMALL)
    assert all_values(again)[-1] == b"ok"


def test_flush_advances_recovery_point_and_flush_messages(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(flush_messages=3))
    assert not plog.append(batch([b"a"]), now_ms=BASE_TS).flush_needed
    assert plog.append(batch([b"b", b"c"]), now_ms=BASE_TS).flush_needed
    assert plog.recovery_point == 0
    plog.flush()
    assert plog.recovery_point == 3
    assert not plog.needs_flush(BASE_TS)


def test_clean_reopen_does_not_rescan_good_segments(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    values = fill(plog, 60)
    plog.close()
    scanned: list[int] = []
    real = segment_module.LogSegment.recover

    def spy(self: segment_module.LogSegment, expected: int, max_batch: int) -> tuple[int, str | None]:
        scanned.append(self.base_offset)
        return real(self, expected, max_batch)

    monkeypatch.setattr(segment_module.LogSegment, "recover", spy)
    again = PartitionLog(tmp_path / "t-0", SMALL, clean_shutdown=True)
    assert scanned == []
    assert again.log_end_offset == 120
    assert all_values(again) == values
    # unclean: only segments from the recovery point on are scanned
    again.close()
    unclean = PartitionLog(tmp_path / "t-0", SMALL, clean_shutdown=False)
    assert scanned == [unclean.segments[-1].base_offset]
    assert all_values(unclean) == values


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_append_of_mangled_bytes_is_all_or_nothing(tmp_path: Path, data: st.DataObject) -> None:
    """Any input either appends whole (and reads back) or raises one clear error, log intact."""
    directory = tmp_path / "fuzz-0"
    shutil.rmtree(directory, ignore_errors=True)
    plog = PartitionLog(directory, LogConfig(max_message_bytes=4096))
    plog.append(batch([b"first"]), now_ms=BASE_TS)
    good = batch([b"a", b"bb"], keys=[b"k", None]) + batch([b"c" * 50])
    raw = bytearray(good)
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["flip", "cut", "junk"]))
        if kind == "flip" and raw:
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del raw[data.draw(st.integers(0, len(raw))):]
        else:
            raw += data.draw(st.binary(max_size=80))
    before = plog.read_bytes(0, 1 << 20)
    error: ProtocolError | StorageError | None = None
    try:
        result = plog.append(bytes(raw), now_ms=BASE_TS)
    except (ProtocolError, StorageError) as exc:
        error = exc
    if error is not None:
        assert isinstance(error.error_code, ErrorCode)
        assert plog.read_bytes(0, 1 << 20) == before
        assert plog.log_end_offset == 1
        return
    assert result.base_offset == 1
    after = plog.read_bytes(1, 1 << 20)
    assert len(after) == len(raw)
    assert next(h.base_offset for _, h in iter_batches(after)) == 1


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    appends=st.lists(st.tuples(st.lists(st.integers(1, 4), min_size=1, max_size=4),
                               st.integers(0, 2**31 - 1)), min_size=1, max_size=6),
)
def test_append_stamps_base_offsets_and_leader_epoch_into_every_batch(
    tmp_path: Path, appends: list[tuple[list[int], int]]
) -> None:
    """What a fetching client and a follower read back: each batch of each append carries the
    offset the log gave it and the append's leader epoch, and its CRC still holds (both fields
    are outside it) - whatever the batch count per append."""
    directory = tmp_path / "stamp-0"
    shutil.rmtree(directory, ignore_errors=True)
    plog = PartitionLog(directory, LogConfig())
    expected: list[tuple[int, int, int]] = []  # (base offset, last offset, leader epoch)
    next_offset = 0
    epoch_floor = 0
    for sizes, epoch_step in appends:
        epoch = epoch_floor + epoch_step % 3  # epochs never go backwards on one leader
        epoch_floor = epoch
        raw = b"".join(batch([b"v%d" % i for i in range(n)]) for n in sizes)
        result = plog.append(raw, now_ms=BASE_TS, leader_epoch=epoch)
        assert result.base_offset == next_offset
        for n in sizes:
            expected.append((next_offset, next_offset + n - 1, epoch))
            next_offset += n
    data = plog.read_bytes(0, 1 << 20)
    got = []
    for pos, header in iter_batches(data):
        validate_batch(data, pos, header)  # CRC intact after the stamping
        got.append((header.base_offset, header.last_offset, header.partition_leader_epoch))
    assert got == expected
    plog.close()


def test_short_writes_are_continued_until_the_whole_append_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pwrite may write less than asked (signals, some file systems): the append goes on from
    where it stopped, and what was acknowledged reads back whole after a restart."""
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    real = os.pwrite
    calls = []

    def at_most_7_bytes(fd: int, data: memoryview, pos: int) -> int:
        calls.append(len(data))
        return real(fd, data[:7], pos)

    monkeypatch.setattr(os, "pwrite", at_most_7_bytes)
    plog.append(batch([b"one", b"two"]), now_ms=BASE_TS)
    monkeypatch.setattr(os, "pwrite", real)
    assert len(calls) > 2
    plog.close()
    again = PartitionLog(tmp_path / "t-0", SMALL)
    assert all_values(again) == [b"one", b"two"]
    again.close()


def test_a_write_of_zero_bytes_fails_the_append_and_leaves_the_log_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    plog.append(batch([b"kept"]), now_ms=BASE_TS)
    monkeypatch.setattr(os, "pwrite", lambda fd, data, pos: 0)
    with pytest.raises(KafkaStorageError) as info:
        plog.append(batch([b"lost"]), now_ms=BASE_TS)
    monkeypatch.undo()
    assert info.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert plog.append(batch([b"next"]), now_ms=BASE_TS).base_offset == 1
    assert all_values(plog) == [b"kept", b"next"]
    plog.close()


def test_bit_rot_in_an_old_segment_is_a_storage_error(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    fill(plog, 40)
    plog.close()
    first = tmp_path / "t-0" / "00000000000000000000.log"
    raw = bytearray(first.read_bytes())
    raw[16] = 7  # magic of the first batch
    first.write_bytes(bytes(raw))
    again = PartitionLog(tmp_path / "t-0", SMALL, clean_shutdown=True)  # not rescanned
    with pytest.raises(KafkaStorageError):
        again.read(0, 100)
    assert all_values(again, start=again.segments[1].base_offset)[-1] == b"v0039-1"


def test_max_timestamp_offset(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", SMALL)
    assert plog.max_timestamp_offset() is None
    stamps = [5, 90, 20, 90, 40, 7, 60]  # the first 90 wins (KIP-734: first record with max)
    for i, ts in enumerate(stamps * 6):
        plog.append(batch([b"%d" % i], ts=BASE_TS + ts + (i // 7) * 100), now_ms=BASE_TS)
    assert len(plog.segments) > 2
    assert plog.max_timestamp_offset() == (36, BASE_TS + 590)
    assert plog.max_timestamp_offset(limit=36) == (35, BASE_TS + 505)
    assert plog.max_timestamp_offset(limit=35) == (29, BASE_TS + 490)
    assert plog.max_timestamp_offset(limit=3) == (1, BASE_TS + 90)


def test_failed_cut_back_takes_the_log_offline_and_recovery_drops_the_torn_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager_dir = tmp_path / "t-0"
    plog = PartitionLog(manager_dir, SMALL)
    fill(plog, 3)
    real_pwrite = os.pwrite

    def half_then_eio(fd: int, data: memoryview, pos: int) -> int:
        real_pwrite(fd, data[: len(data) // 2], pos)
        raise OSError(errno.EIO, "I/O error")

    def no_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "pwrite", half_then_eio)
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(KafkaStorageError):
        plog.append(batch([b"x" * 100]), now_ms=BASE_TS)
    monkeypatch.undo()
    assert plog.offline
    with pytest.raises(KafkaStorageError):
        plog.append(batch([b"y"]), now_ms=BASE_TS)
    plog.close()  # an offline log skips the flush: its recovery point stays behind
    again = PartitionLog(manager_dir, SMALL)
    assert again.log_end_offset == 6
    assert all_values(again)[-1] == b"v0002-1"
    assert again.append(batch([b"z"]), now_ms=BASE_TS).base_offset == 6


def test_missing_or_damaged_index_files_are_rebuilt(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=4096, index_interval_bytes=128)
    plog = PartitionLog(tmp_path / "t-0", cfg)
    values = fill(plog, 120, ts_step=10)
    plog.close()
    files = sorted((tmp_path / "t-0").glob("*.index"))
    assert len(files) >= 3
    files[0].unlink()
    files[1].write_bytes(b"\x00\x00\x00\x09\x00\x00\x00\x05" * 3)  # not monotonic
    (tmp_path / "t-0" / files[2].name.replace(".index", ".timeindex")).write_bytes(b"junk")
    again = PartitionLog(tmp_path / "t-0", cfg, clean_shutdown=True)
    assert all_values(again) == values
    for offset in range(0, 240, 17):
        assert records_of(again.read_bytes(offset, 1))[-1][0] >= offset
    assert again.offset_for_timestamp(BASE_TS + 555) == (112, BASE_TS + 560)
    assert all(len(s.index) > 0 for s in again.segments[:3])


def test_active_segment_has_kafkas_index_files_from_creation_to_clean_close(tmp_path: Path) -> None:
    """Kafka's layout: both index files exist for every segment, the active one included, and
    a clean close leaves the active segment's max timestamp as its last time index entry."""
    plog = PartitionLog(tmp_path / "t-0", LogConfig())
    stem = tmp_path / "t-0" / "00000000000000000000"
    assert stem.with_suffix(".index").exists()
    assert stem.with_suffix(".timeindex").exists()
    plog.append(batch([b"a", b"b"], ts=BASE_TS), now_ms=BASE_TS)
    plog.append(batch([b"c"], ts=BASE_TS + 50), now_ms=BASE_TS)
    plog.append(batch([b"d"], ts=BASE_TS + 10), now_ms=BASE_TS)
    plog.close()
    assert stem.with_suffix(".index").read_bytes() == b""  # below index.interval.bytes
    # (timestamp int64, relative offset int32): offset 2 holds the largest timestamp
    assert stem.with_suffix(".timeindex").read_bytes() == struct.pack(">qi", BASE_TS + 50, 2)
    reopened = PartitionLog(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    assert reopened.offset_for_timestamp(BASE_TS + 20) == (2, BASE_TS + 50)
    reopened.append(batch([b"e"], ts=BASE_TS + 100), now_ms=BASE_TS)
    reopened.close()
    assert stem.with_suffix(".timeindex").read_bytes() == struct.pack(
        ">qi", BASE_TS + 50, 2) + struct.pack(">qi", BASE_TS + 100, 4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    codec=st.sampled_from([Compression.NONE, Compression.LZ4, Compression.ZSTD]),
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=3),
    unset_max_timestamp=st.booleans(),
    log_append_time=st.booleans(),
)
def test_validate_then_append_writes_what_append_alone_writes(
    tmp_path_factory: pytest.TempPathFactory, codec: Compression, sizes: list[int],
    unset_max_timestamp: bool, log_append_time: bool,
) -> None:
    """The produce path may walk a batch in a worker thread (`validate`) and write it later
    (`append` of the result): the log must hold the same bytes and answer the same offsets as
    the one-call append, max timestamp recomputed included."""
    config = LogConfig(message_timestamp_type="LogAppendTime" if log_append_time else "CreateTime")
    batches = b"".join(
        build_batch([Record(i, i, None, b"v%d" % i) for i in range(n)], base_timestamp=BASE_TS,
                    compression=codec, max_timestamp=-1 if unset_max_timestamp else None)
        for n in sizes
    )
    root = tmp_path_factory.mktemp("logs")
    one_call, split = PartitionLog(root / "a-0", config), PartitionLog(root / "b-0", config)
    expected = one_call.append(batches, now_ms=BASE_TS + 7, leader_epoch=3)
    validated = split.validate(batches, BASE_TS + 7)
    assert split.log_end_offset == 0  # validating writes nothing
    assert split.append(validated, now_ms=BASE_TS + 7, leader_epoch=3) == expected
    assert split.read_bytes(0, 1 << 20) == one_call.read_bytes(0, 1 << 20)


def test_validate_refuses_what_append_refuses_and_writes_nothing(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(cleanup_policy="compact"))
    with pytest.raises(RecordValidationError) as info:
        plog.validate(batch([b"no key"]), BASE_TS)
    assert info.value.error_code == ErrorCode.INVALID_RECORD
    assert plog.log_end_offset == 0
    validated = plog.validate(batch([b"v"], keys=[b"k"]), BASE_TS)
    assert plog.append(validated, now_ms=BASE_TS).base_offset == 0
