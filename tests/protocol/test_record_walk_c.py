"""The C record walk (kafkapy/protocol/_record_walk.c) against the Python one, the reference.

The C loop parses untrusted bytes on the produce path, so for any bytes it must give what the
Python loop gives: the same largest timestamp and rule results for a valid batch, and for a
malformed one the same exception, error code, record index and message. Each test runs both
loops on the same input and compares their outcomes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import record_walk
from kafkapy.protocol.compression import Compression
from kafkapy.protocol.record_walk import NO_TIMESTAMP_LIMIT, RecordChecks, python_loop, walk_records
from kafkapy.protocol.records import Buffer, parse_batch_header
from tests.protocol.test_record_walk import (
    BASE_TS,
    CODECS,
    FAULTS,
    Rec,
    _batch,
    _corrupt,
    _recs,
    _region,
    _zigzag,
)

pytestmark = pytest.mark.timeout(300)

c_loop = record_walk.c_loop
needs_c = pytest.mark.skipif(
    c_loop is None, reason="the C record walk is not built (python setup.py build_ext --inplace)"
)


def test_the_c_walk_is_active_when_built() -> None:
    """CI always has a compiler, so there the C walk must be the one `walk_records` uses; a
    build that silently fell back to the Python loop would cost the produce path 3x."""
    if c_loop is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kafkapy.protocol._record_walk is not built under CI, which has a compiler")
        pytest.skip("the C record walk is not built (no compiler when kafkapy was installed)")
    assert record_walk.ACCELERATED
    assert record_walk._LOOP is c_loop


def _outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """What a walk answered: its result, or its exception's type, code, record errors, text."""
    try:
        return ("result", call())
    except Exception as e:
        return (type(e), getattr(e, "error_code", None), getattr(e, "record_errors", None), str(e))


def _same_batch_outcome(data: Buffer, pos: int = 0, checks: RecordChecks | None = None) -> tuple[Any, ...]:
    header = parse_batch_header(data, pos)
    outcomes = [
        _outcome(partial(walk_records, data, pos, header, checks or RecordChecks(), loop=loop))
        for loop in (python_loop, c_loop)
    ]
    assert outcomes[1] == outcomes[0]
    return outcomes[0]


def _same_loop_outcome(
    data: Buffer, start: int, end: int, count: int, limits: tuple[bool, int, int] = (False, -(2**80), 2**80)
) -> tuple[Any, ...]:
    assert c_loop is not None
    python = _outcome(lambda: python_loop(data, start, end, count, limits))
    c = _outcome(lambda: c_loop(data, start, end, count, limits))
    assert c == python
    return python


_checks = st.builds(
    RecordChecks,
    partition=st.just("t-0"),
    require_key=st.booleans(),
    min_timestamp=st.one_of(st.just(-NO_TIMESTAMP_LIMIT), st.integers(BASE_TS - 2**41, BASE_TS + 2**41)),
    max_timestamp=st.one_of(st.just(NO_TIMESTAMP_LIMIT), st.integers(BASE_TS - 2**41, BASE_TS + 2**41)),
)


@needs_c
@given(recs=_recs, codec=st.sampled_from(CODECS), fault=st.sampled_from(FAULTS),
       at=st.integers(0, 100), amount=st.integers(1, 5), checks=_checks)  # fmt: skip
@settings(max_examples=400, deadline=None)
def test_valid_and_single_fault_batches_get_the_same_answer(
    recs: list[Rec], codec: Compression, fault: str, at: int, amount: int, checks: RecordChecks
) -> None:
    recs = [replace(r, offset_delta=i) for i, r in enumerate(recs)]
    _same_batch_outcome(_batch(_region(recs), len(recs), codec), checks=checks)
    region, count = _corrupt(recs, fault, at % len(recs), amount)
    _same_batch_outcome(_batch(region, count, codec), checks=checks)


@needs_c
@given(recs=_recs, codec=st.sampled_from(CODECS), at=st.integers(0, 100), extra=st.integers(1, 3),
       trailer=st.binary(max_size=40))  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_header_counts_above_the_headers_get_the_same_answer(
    recs: list[Rec], codec: Compression, at: int, extra: int, trailer: bytes
) -> None:
    """A record declaring more headers than it holds: the walk reads the next record's bytes
    (or the batch's trailer) as headers until it has passed the record's end."""
    recs = [replace(r, offset_delta=i) for i, r in enumerate(recs)]
    i = at % len(recs)
    recs[i] = replace(recs[i], header_count=len(recs[i].headers) + extra)
    _same_batch_outcome(_batch(_region(recs), len(recs), codec) + trailer)


@needs_c
@given(recs=_recs, data=st.data(), trailer=st.binary(max_size=40), lead=st.integers(0, 3))
@settings(max_examples=400, deadline=None)
def test_mutated_record_bytes_get_the_same_answer(
    recs: list[Rec], data: st.DataObject, trailer: bytes, lead: int
) -> None:
    """Random byte changes anywhere in the records, in an uncompressed batch that other bytes
    follow in the buffer (both loops may read past the batch's end before its length check)."""
    recs = [replace(r, offset_delta=i) for i, r in enumerate(recs)]
    region = bytearray(_region(recs))
    for _ in range(data.draw(st.integers(1, 4))):
        region[data.draw(st.integers(0, len(region) - 1))] = data.draw(st.integers(0, 255))
    batch = _batch(bytes(region), len(recs))
    _same_batch_outcome(bytearray(lead) + batch + trailer, pos=lead)
    _same_batch_outcome(memoryview(bytes(batch)))


_limit = st.one_of(st.integers(-(2**70), 2**70), st.integers(-(2**63) - 2, -(2**63) + 2),
                   st.integers(2**63 - 3, 2**63 + 2))  # fmt: skip


@needs_c
@given(
    data=st.binary(max_size=200),
    start=st.integers(0, 210),
    end=st.integers(-5, 260),
    count=st.integers(0, 12),
    limits=st.tuples(st.booleans(), _limit, _limit),
)
@settings(max_examples=1000, deadline=None)
def test_any_bytes_get_the_same_answer(
    data: bytes, start: int, end: int, count: int, limits: tuple[bool, int, int]
) -> None:
    """The loops alone on arbitrary bytes, positions and bounds (even bounds beyond int64)."""
    _same_loop_outcome(data, start, end, count, limits)


def _one(body: bytes, length: int | None = None) -> bytes:
    """One record: its length varint (the body's unless `length`), then `body`."""
    return _zigzag(len(body) if length is None else length) + body


_VALID = b"\x00\x00\x00\x02k\x02v\x00"  # attributes, ts 0, offset 0, key "k", value "v", 0 headers


@needs_c
@pytest.mark.parametrize(
    ("region", "count", "message"),
    [
        (b"\xff\xff\xff\xff\x0f", 1, "Invalid record size -2147483648"),  # the most negative
        (_zigzag(2**31 - 1) + _VALID, 1, "Invalid record size: expected 2147483647"),
        (_zigzag(-(2**31)) + _VALID, 1, "Invalid record size -2147483648"),
        (b"\xff\xff\xff\xff\x1f", 1, "Varint is out of range"),  # 5 bytes over 32 bits
        (b"\xff\xff\xff\xff\xff\x01", 1, "Varint is too long, more than 5 bytes"),
        (b"\xff\xff\xff", 1, "Incorrect declared batch size, premature EOF"),  # cut varint
        (b"", 1, "Incorrect declared batch size, premature EOF"),
        (_one(b"\x00" + b"\xff" * 9 + b"\x01" + _VALID[2:]), 1, ""),  # 10-byte ts delta, max
        (_one(b"\x00" + b"\xff" * 9 + b"\x02" + _VALID[2:]), 1, "Varint is out of range"),
        (_one(b"\x00" + b"\xff" * 10 + b"\x01" + _VALID[2:]), 1, "Varint is too long, more than 10"),
        (_one(b"\x00" + b"\xff" * 9, 12), 1, "Invalid record size: expected 12"),
        (_one(b"\x00" + b"\xff" * 9, 10), 1, "Invalid record size: expected to read 10"),
        (_one(b"\x00\x00\x00" + _zigzag(2**31 - 1) + b"\x02v\x00"), 1, "Invalid record size"),
        (_one(b"\x00\x00\x00" + _zigzag(-(2**31)) + b"\x02v\x00"), 1, "Invalid negative key size"),
        (_one(b"\x00\x00\x00\x01" + _zigzag(-(2**31))), 1, "Invalid negative value size"),
        (_one(b"\x00\x00\x00\x01\x01" + _zigzag(2**31 - 1)), 1, "Found invalid number of record headers 2147483647"),
        (_one(b"\x00\x00\x00\x01\x01\x02" + _zigzag(2**31 - 1) + b"\x00"), 1, "Invalid record size"),
        (_one(b"\x00\x00\x00\x01\x01\x02\x02h" + _zigzag(-(2**31))), 1, "Invalid negative header value size"),
        (_one(b"\x00\x00\x00\x01\x01\x02\x02h\x01"), 1, ""),  # a null header value
        (_one(b"\x00\x00\x00\x01\x01\x02\x02h" + b"\xff" * 5), 1, "Varint is too long, more than 5"),
        (_one(_VALID) + _one(_VALID), 2, "Invalid offset delta 0 of record 1"),
        # 2 headers declared, the first fills the record: the second is read past it
        (_one(b"\x00\x00\x00\x01\x01\x04\x02h\x02v"), 1, "Invalid record size: expected to read 10"),
    ],
)
def test_edge_varints_and_lengths_get_the_same_answer(region: bytes, count: int, message: str) -> None:
    """Varints cut at the buffer's end, too long or over range, and the largest and most
    negative lengths and counts: each checked read, in both loops."""
    for data in (region, region + b"\x00" * 12, region + b"\xff" * 12):
        _same_batch_outcome(_batch(data, count))
        for cut in range(len(region)):
            _same_loop_outcome(region[:cut], 0, len(region), count)
    outcome = _same_loop_outcome(region, 0, len(region), count)
    assert outcome[3 if message else 0].startswith(message or "result"), outcome


@needs_c
@pytest.mark.parametrize("require_key", [False, True])
def test_a_batch_over_a_mib_gets_the_same_answer(require_key: bool) -> None:
    """A region large enough that the C loop walks it without the GIL, with hundreds of
    keyless and late records to report."""
    recs = [Rec(i, i % 50 - 25, key=None if i % 7 == 0 else b"k", value=b"v" * 500) for i in range(4000)]
    checks = RecordChecks("t-0", require_key, BASE_TS - 20, BASE_TS + 20)
    for codec in (Compression.NONE, Compression.ZSTD):
        outcome = _same_batch_outcome(_batch(_region(recs), len(recs), codec), checks=checks)
        assert len(outcome[2]) > 500


@needs_c
@pytest.mark.parametrize(("start", "end"), [(-1, 10), (2**62 + 1, 2**62 + 10), (0, 2**62 + 1), (0, -(2**62) - 1)])
def test_positions_beyond_any_batch_are_refused_not_walked(start: int, end: int) -> None:
    """Positions come from a batch header's int32 fields; the C loop refuses ones so far out
    that its 64-bit position sums could overflow, rather than walking them."""
    assert c_loop is not None
    with pytest.raises(ValueError, match="start must be in"):
        c_loop(b"\x00" * 16, start, end, 1, (False, 0, 0))
