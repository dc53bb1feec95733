"""Log compaction: latest value per key, offsets kept, tombstones expire, crash-safe swap."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.compression import Compression
from kafkapy.protocol.records import Record, build_batch, build_control_batch, iter_batches
from kafkapy.storage import LogConfig, PartitionLog, clean_log
from kafkapy.storage import swap as swap_module
from tests.storage.helpers import BASE_TS, batch, batch_offsets, read_all

pytestmark = pytest.mark.timeout(60)

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=64,
                    delete_retention_ms=1000, min_cleanable_dirty_ratio=0.5)
NOW = BASE_TS + 10_000


def content(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return read_all(plog)


def keyed_log(path: Path, writes: Sequence[tuple[bytes, bytes | None]], per_batch: int = 2,
              config: LogConfig = COMPACT) -> PartitionLog:
    plog = PartitionLog(path, config)
    for i in range(0, len(writes), per_batch):
        chunk = writes[i : i + per_batch]
        plog.append(batch([v for _, v in chunk], keys=[k for k, _ in chunk], ts=BASE_TS),
                    now_ms=BASE_TS)
    plog.roll(BASE_TS)  # everything written so far becomes cleanable
    plog.high_watermark = plog.log_end_offset
    return plog


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(st.tuples(st.sampled_from([b"k%d" % i for i in range(6)]),
                                 st.binary(min_size=1, max_size=12)), min_size=1, max_size=60))
def test_compaction_keeps_latest_value_per_key_at_its_offset(
    tmp_path: Path, writes: list[tuple[bytes, bytes]]
) -> None:
    directory = tmp_path / "c-0"
    shutil.rmtree(directory, ignore_errors=True)
    plog = keyed_log(directory, list(writes))
    before = content(plog)
    leo = plog.log_end_offset
    clean_log(plog, NOW, force=True)
    latest = {k: (o, v) for o, k, v in before}
    expected = sorted((o, k, v) for k, (o, v) in latest.items())
    assert content(plog) == expected
    assert plog.log_end_offset == leo
    # every offset still reads: a removed one resolves to the next surviving batch
    for offset in range(plog.log_start_offset, leo):
        got = batch_offsets(plog.read_bytes(offset, 1))
        assert len(got) == 1
        assert got[0][1] >= offset
    plog.close()
    reopened = PartitionLog(directory, COMPACT)  # unclean reopen re-validates cleaned segments
    assert content(reopened) == expected
    reopened.close()


def test_tombstones_expire_after_delete_retention(tmp_path: Path) -> None:
    writes = [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3")]
    plog = keyed_log(tmp_path / "c-0", writes, per_batch=1)
    clean_log(plog, BASE_TS + 500, force=True)  # tombstone younger than delete.retention.ms
    assert content(plog) == [(1, b"b", b"2"), (2, b"a", None), (3, b"c", b"3")]
    plog.append(batch([b"4"], keys=[b"d"]), now_ms=BASE_TS)
    plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    clean_log(plog, BASE_TS + 1000, force=True)
    assert content(plog) == [(1, b"b", b"2"), (3, b"c", b"3"), (4, b"d", b"4")]


def test_dirty_ratio_and_compaction_lag_gate_cleaning(tmp_path: Path) -> None:
    writes = [(b"k%d" % (i % 3), b"v%d" % i) for i in range(40)]
    lagged = LogConfig(cleanup_policy="compact", segment_bytes=600, min_compaction_lag_ms=5000)
    plog = keyed_log(tmp_path / "lag-0", writes, config=lagged)
    # the newest record of each batch is BASE_TS + 1
    assert clean_log(plog, BASE_TS + 5000) is None  # too young
    assert clean_log(plog, BASE_TS + 5001) is not None

    plog2 = keyed_log(tmp_path / "c-0", writes)
    first = clean_log(plog2, NOW)
    assert first is not None
    assert first.records_removed == 37
    assert plog2.cleaner_offset == first.end_offset
    # a little new dirty data: ratio below 0.5, nothing to do until forced
    plog2.append(batch([b"x"], keys=[b"k0"]), now_ms=BASE_TS)
    plog2.roll(BASE_TS)
    plog2.high_watermark = plog2.log_end_offset
    assert clean_log(plog2, NOW) is None
    plog2.close()
    reopened = PartitionLog(tmp_path / "c-0", COMPACT, clean_shutdown=True)
    assert reopened.cleaner_offset == first.end_offset
    assert clean_log(reopened, NOW, force=True) is not None
    assert [v for _, k, v in content(reopened) if k == b"k0"] == [b"x"]


def test_cleaning_stops_at_the_last_stable_offset(tmp_path: Path) -> None:
    writes = [(b"k", b"v%d" % i) for i in range(30)]
    plog = keyed_log(tmp_path / "c-0", writes)
    plog.last_stable_offset = 0
    assert clean_log(plog, NOW, force=True) is None
    plog.last_stable_offset = None
    assert clean_log(plog, NOW, force=True) is not None


def test_transactions_survive_cleaning(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "c-0", COMPACT)

    def data(pid: int, key: bytes, value: bytes) -> None:
        plog.append(batch([value], keys=[key], producer_id=pid, producer_epoch=0,
                          transactional=True), now_ms=BASE_TS)

    def marker(pid: int, commit: bool) -> None:
        plog.append(build_control_batch(commit, producer_id=pid, producer_epoch=0,
                                        coordinator_epoch=1, timestamp_ms=BASE_TS),
                    now_ms=BASE_TS, from_client=False)

    plog.append(batch([b"plain"], keys=[b"a"]), now_ms=BASE_TS)  # 0
    data(1, b"a", b"committed")  # 1
    data(2, b"a", b"aborted")  # 2 must not shadow offset 1
    data(3, b"b", b"ongoing")  # 3 no marker yet: kept untouched
    marker(1, True)  # 4
    marker(2, False)  # 5
    plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    clean_log(plog, NOW, force=True)
    got = content(plog)
    assert (1, b"a", b"committed") in got
    assert all(v != b"aborted" for _, _, v in got)
    assert (0, b"a", b"plain") not in got
    assert (3, b"b", b"ongoing") in got
    assert [o for o, _, _ in got if o in (4, 5)] == [4, 5]  # markers kept


@pytest.mark.parametrize("step", ["writing", "cleaned", "committed", "renaming", "swapped"])
def test_crash_mid_clean_leaves_before_or_after(tmp_path: Path, step: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    writes = [(b"k%d" % (i % 5), b"v%d" % i) for i in range(60)]
    reference = keyed_log(tmp_path / "ref-0", writes)
    before = content(reference)
    clean_log(reference, NOW, force=True)
    after = content(reference)
    assert after != before

    plog = keyed_log(tmp_path / "c-0", writes)

    class Crash(Exception):
        pass

    def crash(at: str) -> None:
        if at == step:
            raise Crash(at)

    monkeypatch.setattr(swap_module, "crash_point", crash)
    with pytest.raises(Crash):
        clean_log(plog, NOW, force=True)
    monkeypatch.undo()
    # the process "dies" here: the old object is abandoned, the directory reopened
    reopened = PartitionLog(tmp_path / "c-0", COMPACT)
    got = content(reopened)
    assert got == (after if step in ("committed", "renaming", "swapped") else before)
    leftovers = [p.name for p in (tmp_path / "c-0").iterdir()
                 if p.name.endswith(".cleaned") or p.name == "cleaner.swap"]
    assert leftovers == []
    assert reopened.append(batch([b"z"], keys=[b"z"]), now_ms=BASE_TS).base_offset == 60


def test_last_batch_of_an_idempotent_producer_survives_empty(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "c-0", COMPACT)
    plog.append(batch([b"old"], keys=[b"k"], producer_id=4, producer_epoch=2), now_ms=BASE_TS)
    plog.append(batch([b"mid"], keys=[b"k"], producer_id=4, producer_epoch=2), now_ms=BASE_TS)
    plog.append(batch([b"new"], keys=[b"k"]), now_ms=BASE_TS)
    plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    clean_log(plog, NOW, force=True)
    data = plog.read_bytes(0, 1 << 20)
    headers = [h for _, h in iter_batches(data)]
    # batch 0 is gone; batch 1 (producer 4's last) stays with no records; batch 2 holds "new"
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [
        (1, 0, 4), (2, 1, -1)]
    assert content(plog) == [(2, b"k", b"new")]
    plog.close()
    assert content(PartitionLog(tmp_path / "c-0", COMPACT)) == [(2, b"k", b"new")]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_compressed_batches_are_compacted_and_stay_compressed(tmp_path: Path,
                                                              codec: Compression) -> None:
    plog = PartitionLog(tmp_path / "c-0", COMPACT)
    for i in range(6):
        records = [Record(offset_delta=j, timestamp_delta=0, key=b"k%d" % j, value=b"v%d" % i)
                   for j in range(3)]
        plog.append(build_batch(records, base_timestamp=BASE_TS, compression=codec),
                    now_ms=BASE_TS)
    plog.append(batch([b"last"], keys=[b"k0"]), now_ms=BASE_TS)
    plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    clean_log(plog, NOW, force=True)
    assert content(plog) == [(16, b"k1", b"v5"), (17, b"k2", b"v5"), (18, b"k0", b"last")]
    headers = [h for _, h in iter_batches(plog.read_bytes(0, 1 << 20))]
    # the thinned batch was re-encoded with its codec, offsets and last offset delta kept
    assert [(h.base_offset, h.last_offset_delta, h.records_count) for h in headers] == [
        (15, 2, 2), (18, 0, 1)]
    assert headers[0].compression == codec


def test_tombstone_age_uses_log_append_time(tmp_path: Path) -> None:
    cfg = LogConfig.from_topic_configs({"message.timestamp.type": "LogAppendTime"}, COMPACT)
    plog = PartitionLog(tmp_path / "c-0", cfg)
    # producer timestamps are ancient; the broker stamped the batches at BASE_TS
    plog.append(batch([b"1"], keys=[b"a"], ts=5), now_ms=BASE_TS)
    plog.append(batch([None], keys=[b"a"], ts=5), now_ms=BASE_TS)
    plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    clean_log(plog, BASE_TS + 500, force=True)
    assert content(plog) == [(1, b"a", None)]  # younger than delete.retention.ms by log time
    plog.append(batch([b"x"], keys=[b"b"]), now_ms=BASE_TS)
    plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    clean_log(plog, BASE_TS + 1000, force=True)
    assert content(plog) == [(2, b"b", b"x")]


def test_a_partition_that_cannot_be_cleaned_is_skipped_until_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's uncleanable partitions: a log whose bytes make cleaning fail is tried once,
    warned about once, skipped on later passes (no re-decompressing, no ERROR every backoff)
    and tried again after `forget` or a config change; the other logs are cleaned meanwhile."""
    import kafkapy.storage.manager as manager_module
    from kafkapy.storage import LogManager

    manager = LogManager([tmp_path], COMPACT)
    for p in range(2):
        plog = manager.get_or_create("t", p)
        for i in range(20):
            plog.append(batch([b"v%d" % i], keys=[b"k"]), now_ms=BASE_TS)
        plog.high_watermark = plog.log_end_offset
    manager.close()
    first = tmp_path / "t-0" / "00000000000000000000.log"
    raw = bytearray(first.read_bytes())
    raw[16] = 9  # bad magic in the oldest segment of t-0 (below the recovery point)
    first.write_bytes(bytes(raw))

    manager = LogManager([tmp_path], COMPACT)
    tried: list[str] = []
    real_clean = manager_module.clean_log

    def spy(plog: PartitionLog, now_ms: int) -> object:
        tried.append(plog.directory.name)
        return real_clean(plog, now_ms)

    monkeypatch.setattr(manager_module, "clean_log", spy)
    assert [r.segments_in > 0 for r in manager.run_cleaner(NOW)] == [True]  # t-1 cleaned
    assert tried == ["t-0", "t-1"]
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "uncleanable" in r.getMessage()]
    assert len(warnings) == 1
    assert "t-0" in warnings[0].getMessage()
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []
    assert list(manager.uncleanable.partitions()) == [("t", 0)]
    count, dirty = manager.uncleanable.per_data_dir(NOW)[tmp_path]
    assert count == 1
    assert dirty > 0

    tried.clear()
    caplog.clear()
    for _ in range(3):
        manager.run_cleaner(NOW)
    assert "t-0" not in tried
    assert [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")] == []

    assert manager.uncleanable.forget(("t", 0))
    tried.clear()
    manager.run_cleaner(NOW)
    assert tried.count("t-0") == 1  # tried again, and uncleanable again
    assert list(manager.uncleanable.partitions()) == [("t", 0)]

    tried.clear()
    plog = manager.get("t", 0)
    assert plog is not None
    plog.set_config(LogConfig(cleanup_policy="compact", segment_bytes=600,
                              min_cleanable_dirty_ratio=0.1))
    manager.run_cleaner(NOW)
    assert tried.count("t-0") == 1  # a config change makes it worth another try
    manager.close()
