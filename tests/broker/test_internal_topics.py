"""`log_batches`: the read-back path both coordinator runtimes load their state with."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.broker.internal_topics import log_batches
from kafkapy.protocol.records import decode_records
from kafkapy.storage import PartitionLog
from tests.storage.helpers import BASE_TS, batch

pytestmark = pytest.mark.timeout(120)


def _values(plog: PartitionLog) -> list[tuple[int, bytes | None]]:
    return [
        (header.base_offset + r.offset_delta, r.value)
        for data, pos, header in log_batches(plog)
        for r in decode_records(data, pos, header)
    ]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 400_000), min_size=0, max_size=8),
    start=st.integers(0, 8),
)
def test_every_batch_from_the_log_start_across_chunks(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], start: int
) -> None:
    """Batches come back once each, in offset order, from the log start to the end, also when
    the log is larger than one read chunk (1 MiB)."""
    plog = PartitionLog(tmp_path_factory.mktemp("log") / "t-0")
    try:
        written = []
        for i, size in enumerate(sizes):
            value = bytes([i]) * size
            plog.append(batch([value]), now_ms=BASE_TS)
            written.append((i, value))
        plog.high_watermark = plog.log_end_offset
        start = min(start, plog.log_end_offset)
        plog.delete_records_before(start)
        assert _values(plog) == written[start:]
    finally:
        plog.close()


def test_stops_at_the_log_end_seen_at_the_call(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    try:
        plog.append(batch([b"a", b"b"]), now_ms=BASE_TS)
        batches = log_batches(plog)
        first = next(batches)
        plog.append(batch([b"late"]), now_ms=BASE_TS)
        assert first[2].base_offset == 0
        assert list(batches) == []
        assert [v for _, v in _values(plog)] == [b"a", b"b", b"late"]
    finally:
        plog.close()
