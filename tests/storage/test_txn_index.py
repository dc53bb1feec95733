"""Aborted-transaction index and producer snapshots: formats, and lifecycle with the log."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.storage import LogConfig, PartitionLog, clean_log
from kafkapy.storage.txn_index import (
    AbortedTxnEntry,
    TransactionIndex,
    delete_snapshots,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from tests.storage.helpers import BASE_TS, batch


@st.composite
def txn_entries(draw: st.DrawFn) -> list[AbortedTxnEntry]:
    out, last = [], 0
    for _ in range(draw(st.integers(0, 12))):
        last += draw(st.integers(1, 20))
        first = last - draw(st.integers(0, 15))
        out.append(AbortedTxnEntry(last, draw(st.integers(0, 5)), first, last + 1))
    return out


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=txn_entries(), start=st.integers(0, 250), length=st.integers(0, 100),
       cut=st.integers(0, 40))
def test_txn_index_round_trip_overlap_and_torn_tail(
    tmp_path: Path, entries: list[AbortedTxnEntry], start: int, length: int, cut: int
) -> None:
    path = tmp_path / "x.txnindex"
    path.unlink(missing_ok=True)
    index = TransactionIndex(path)
    for e in entries:
        index.append(e)
    loaded = TransactionIndex(path)
    assert loaded.entries == entries
    end = start + length
    assert loaded.overlapping(start, end) == [
        e for e in entries if e.last_offset >= start and e.first_offset < end]
    if entries:
        data = path.read_bytes()
        path.write_bytes(data[: max(0, len(data) - cut)])  # a crash mid-append
        whole = (len(data) - cut) // 34
        assert TransactionIndex(path).entries == entries[: max(0, whole)]


def test_aborted_transactions_follow_the_log(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for _ in range(12):
        plog.append(batch([b"x" * 20]), now_ms=BASE_TS)
    assert len(plog.segments) > 3
    seg_bases = [s.base_offset for s in plog.segments]
    plog.append_aborted_txn(7, 0, 1, 2)
    plog.append_aborted_txn(8, 2, seg_bases[2] + 1, seg_bases[2] + 2)
    plog.append_aborted_txn(9, 10, 11, 12)
    got = plog.aborted_transactions(0, 3)
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in got] == [(7, 0, 1),
                                                                            (8, 2, seg_bases[2] + 1)]
    assert [e.producer_id for e in plog.aborted_transactions(11, 12)] == [9]
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=300), clean_shutdown=True)
    assert [e.producer_id for e in reopened.aborted_transactions(0, 100)] == [7, 8, 9]
    reopened.truncate_to(11)
    assert [e.producer_id for e in reopened.aborted_transactions(0, 100)] == [7, 8]
    reopened.high_watermark = reopened.log_end_offset
    reopened.delete_records_before(seg_bases[1])
    assert [e.producer_id for e in reopened.aborted_transactions(0, 100)] == [8]


def test_cleaning_keeps_txn_index_entries(tmp_path: Path) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=300)
    plog = PartitionLog(tmp_path / "c-0", cfg)
    for i in range(12):
        plog.append(batch([b"v%d" % i], keys=[b"k"]), now_ms=BASE_TS)
    plog.append_aborted_txn(5, 3, 4, 5)
    plog.append_aborted_txn(6, 6, 8, 9)
    plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    assert clean_log(plog, BASE_TS + 10**6, force=True) is not None
    assert [e.producer_id for e in plog.aborted_transactions(0, 100)] == [5, 6]
    assert not list((tmp_path / "c-0").glob("*.cleaned"))


def test_producer_snapshots(tmp_path: Path) -> None:
    assert read_snapshot(tmp_path, 100) is None
    write_snapshot(tmp_path, 10, b"ten")
    write_snapshot(tmp_path, 30, b"thirty", fsync=False)
    assert list_snapshots(tmp_path) == [10, 30]
    assert read_snapshot(tmp_path, 29) == (10, b"ten")
    assert read_snapshot(tmp_path, 30) == (30, b"thirty")
    assert read_snapshot(tmp_path, 9) is None
    assert delete_snapshots(tmp_path, above=20) == 1
    assert list_snapshots(tmp_path) == [10]

    plog = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for _ in range(12):
        plog.append(batch([b"x" * 20]), now_ms=BASE_TS)
    plog.write_producer_snapshot(2, b"a")
    plog.write_producer_snapshot(11, b"b")
    plog.truncate_to(8)  # snapshots past the new end describe data that is gone
    assert plog.read_producer_snapshot(100) == (2, b"a")
    plog.high_watermark = plog.log_end_offset
    plog.delete_records_before(plog.segments[1].base_offset)
    # the newest snapshot below the new log start stays while none is at or above it: producer
    # state is cumulative and the broker may not have snapshotted it since (lazy loading)
    assert plog.read_producer_snapshot(100) == (2, b"a")
    leo = plog.log_end_offset
    plog.write_producer_snapshot(leo, b"c")
    plog.delete_records_before(plog.segments[-1].base_offset)
    assert list_snapshots(plog.directory) == [leo]  # older ones go once a newer one exists


def test_snapshots_above_the_recovered_log_end_are_removed_at_open(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    for _ in range(3):
        plog.append(batch([b"x"]), now_ms=BASE_TS)
    plog.write_producer_snapshot(3, b"at the end")
    # a crash lost the tail the newer snapshot describes: replication would refill offsets
    # 3..9 with other batches, and the snapshot would then be read as their state
    plog.write_producer_snapshot(9, b"beyond")
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0")
    assert reopened.log_end_offset == 3
    assert list_snapshots(reopened.directory) == [3]
