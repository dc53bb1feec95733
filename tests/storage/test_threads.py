"""The thread contract: appends on one thread while flush, retention and reads run on others."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkapy.storage import LogConfig, OffsetOutOfRangeError, PartitionLog
from tests.storage.helpers import BASE_TS, batch, batch_offsets, records_of


@pytest.mark.timeout(60)
def test_append_flush_retention_and_reads_concurrently(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=2048, retention_bytes=8192, index_interval_bytes=256)
    plog = PartitionLog(tmp_path / "t-0", cfg)
    stop = threading.Event()
    errors: list[BaseException] = []

    def maintenance() -> None:
        try:
            for _ in range(100_000):
                if stop.is_set():
                    break
                plog.flush()
                plog.delete_old_segments(BASE_TS)
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(100_000):
                if stop.is_set():
                    break
                start = plog.log_start_offset
                try:
                    data = plog.read_bytes(start, 1024)
                except OffsetOutOfRangeError:
                    continue  # retention moved the start meanwhile
                for offset, _, value in records_of(data):
                    assert value == b"v%d" % offset
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=maintenance), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    try:
        for i in range(3000):
            result = plog.append(batch([b"v%d" % i]), now_ms=BASE_TS)
            assert result.base_offset == i
            plog.high_watermark = plog.log_end_offset
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert errors == []
    plog.delete_old_segments(BASE_TS)
    assert 0 < plog.log_start_offset < 3000
    tail = plog.read_bytes(2999, 100)
    assert batch_offsets(tail) == [(2999, 2999)]
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0", cfg, clean_shutdown=True)
    assert reopened.log_end_offset == 3000
    assert reopened.recovery_point == 3000
