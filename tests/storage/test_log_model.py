"""Model-based test: random operations on a PartitionLog against a tiny in-memory model.

The model keeps the batches as (base offset, last offset, values) plus the segment base
offsets (segments only roll when the test says so: `segment.bytes` is huge), the log start
offset and the high watermark. After every step the log must agree with it exactly.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.protocol.records import iter_batches
from kafkapy.storage import LogConfig, OffsetOutOfRangeError, PartitionLog
from tests.storage.helpers import BASE_TS, batch, records_of

CONFIG = LogConfig(segment_bytes=1 << 30, retention_ms=1000, index_interval_bytes=100)


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkapy-model-"))
        self.log = PartitionLog(self.tmp / "t-0", CONFIG)
        self.batches: list[tuple[int, int, list[bytes]]] = []
        self.segment_bases = [0]
        self.log_start = 0
        self.leo = 0
        self.hw = 0
        self.counter = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- operations ---------------------------------------------------------------------
    @rule(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3))
    def append(self, sizes: list[int]) -> None:
        data = b""
        expected = []
        offset = self.leo
        for n in sizes:
            values = [b"r%d" % (self.counter + i) for i in range(n)]
            self.counter += n
            data += batch(values)
            expected.append((offset, offset + n - 1, values))
            offset += n
        result = self.log.append(data, now_ms=BASE_TS)
        assert (result.base_offset, result.last_offset) == (self.leo, offset - 1)
        self.batches += expected
        self.leo = offset

    @rule()
    def roll(self) -> None:
        self.log.roll(BASE_TS)
        if self.leo > self.segment_bases[-1] and any(
            b[0] >= self.segment_bases[-1] for b in self.batches
        ):
            self.segment_bases.append(self.leo)

    @rule(data=st.data())
    def set_high_watermark(self, data: st.DataObject) -> None:
        hw = data.draw(st.integers(0, self.leo + 2))
        self.log.high_watermark = hw
        self.hw = min(max(hw, self.log_start), self.leo)

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.leo + 1))
        if offset > self.hw:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.delete_records_before(offset)
            return
        self.log.delete_records_before(offset)
        self.log_start = max(self.log_start, offset)
        self._drop_segments_below_start()

    @rule()
    def retention(self) -> None:
        self.log.delete_old_segments(BASE_TS + 10**9)
        while len(self.segment_bases) > 1 and self.segment_bases[1] <= self.hw:
            self.segment_bases.pop(0)
        self.log_start = max(self.log_start, self.segment_bases[0])
        self._drop_batches_below_start()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.leo + 1))
        self.log.truncate_to(offset)
        if offset >= self.leo:
            return
        if offset <= self.log_start:
            self._restart_at(offset)
            return
        self.segment_bases = [b for b in self.segment_bases if b < offset]
        self.batches = [b for b in self.batches if b[1] < offset]
        ends = [b[1] + 1 for b in self.batches if b[0] >= self.segment_bases[-1]]
        self.leo = max([self.segment_bases[-1], *ends])
        if self.leo < self.log_start:  # a removed batch straddled the log start
            self._restart_at(self.log_start)
            return
        self.hw = min(self.hw, self.leo)

    def _restart_at(self, offset: int) -> None:
        self.batches, self.segment_bases = [], [offset]
        self.log_start = self.leo = self.hw = offset

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        # Without close() this is a crash of the process (the page cache survives it).
        self.log = PartitionLog(self.tmp / "t-0", CONFIG, clean_shutdown=clean)
        # Opening finishes an interrupted deletion: segments wholly below the log start go.
        self._drop_segments_below_start()
        if not clean:
            # The high watermark is checkpointed lazily: a crash may only move it back.
            assert self.log_start <= self.log.high_watermark <= self.hw
            self.hw = self.log.high_watermark

    @precondition(lambda self: self.leo > self.log_start)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo - 1))
        max_bytes = data.draw(st.integers(1, 400))
        max_offset = data.draw(st.one_of(st.none(), st.integers(self.log_start, self.leo + 1)))
        got = self.log.read_bytes(offset, max_bytes, max_offset=max_offset)
        limit = self.leo if max_offset is None else max_offset
        # a batch straddling the limit is hidden too (Kafka: the limit is a batch boundary)
        visible = [b for b in self.batches if offset <= b[1] < limit]
        headers = [h for _, h in iter_batches(got)]
        if not visible:
            assert got == b""
            return
        assert headers, "a read with visible data returns at least one batch"
        assert headers[0].base_offset == visible[0][0]
        assert len(headers) == 1 or len(got) <= max_bytes
        assert [(h.base_offset, h.last_offset) for h in headers] == [
            (b[0], b[1]) for b in visible[: len(headers)]
        ]

    # --- helpers ------------------------------------------------------------------------
    def _drop_segments_below_start(self) -> None:
        while len(self.segment_bases) > 1 and self.segment_bases[1] <= self.log_start:
            self.segment_bases.pop(0)
        self._drop_batches_below_start()

    def _drop_batches_below_start(self) -> None:
        first = self.segment_bases[0]
        self.batches = [b for b in self.batches if b[0] >= first]

    # --- invariants ---------------------------------------------------------------------
    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_start_offset == self.log_start
        assert self.log.log_end_offset == self.leo
        assert self.log.high_watermark == self.hw
        assert [s.base_offset for s in self.log.segments] == self.segment_bases

    @invariant()
    def content_agrees(self) -> None:
        expected = [
            (b[0] + i, v) for b in self.batches for i, v in enumerate(b[2])
            if b[0] + i >= self.log_start
        ]
        got: list[tuple[int, bytes | None]] = []
        offset = self.log_start
        for _ in range(1000):
            if offset >= self.leo:
                break
            recs = records_of(self.log.read_bytes(offset, 1 << 20))
            got += [(o, v) for o, _, v in recs if o >= offset]
            offset = recs[-1][0] + 1
        assert got == expected


LogModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_log_matches_model = pytest.mark.timeout(120)(LogModel.TestCase)
