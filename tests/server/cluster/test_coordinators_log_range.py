"""`log_batches(plog, start, end)`: the ranges partitioned coordinators read.

A partition's leadership load reads [log start, LEO at the start) in a worker thread and then
the tail appended meanwhile; a failed replication wait reverts to the log below the high
watermark. Both rely on a range giving exactly the batches holding offsets in [start, end),
once each, in order - checked for any batch sizes (across the 1 MiB read chunks) and ranges.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.broker.internal_topics import log_batches
from kafkapy.storage import PartitionLog
from tests.storage.helpers import BASE_TS, batch

pytestmark = pytest.mark.timeout(120)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 300_000)), max_size=8),
    start=st.none() | st.integers(0, 30),
    end=st.none() | st.integers(0, 30),
)
def test_a_range_gives_the_batches_holding_its_offsets(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[tuple[int, int]],
    start: int | None,
    end: int | None,
) -> None:
    plog = PartitionLog(tmp_path_factory.mktemp("log") / "__consumer_offsets-0")
    try:
        spans = []
        for i, (count, size) in enumerate(batches):
            result = plog.append(batch([bytes([i]) * size] * count), now_ms=BASE_TS)
            spans.append((result.base_offset, result.last_offset))
        lo = 0 if start is None else start
        hi = plog.log_end_offset if end is None else min(end, plog.log_end_offset)
        expected = [(b, last) for b, last in spans if last >= lo and b < hi and lo < hi]
        got = [(h.base_offset, h.last_offset) for _, _, h in log_batches(plog, start, end)]
        assert got == expected
        # the two-step load: [start, middle) then [middle, end) is the same as one read
        middle = (lo + hi) // 2
        first = [(h.base_offset, h.last_offset) for _, _, h in log_batches(plog, start, middle)]
        rest = [(h.base_offset, h.last_offset) for _, _, h in log_batches(plog, middle, end)]
        if first and rest and first[-1] == rest[0]:  # a batch straddling the middle
            rest = rest[1:]
        assert first + rest == expected
    finally:
        plog.close()
