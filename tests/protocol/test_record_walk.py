"""The record walk (kafkapy/protocol/record_walk.py): Kafka's LogValidator record checks.

A batch whose CRC is right but whose records are not (a count that lies, a length that does not
add up, garbage) must be refused with CORRUPT_MESSAGE naming the record, whatever the codec:
accepted, it breaks every consumer of the partition for good. The records here are encoded by
a small encoder of the tests' own (`_record`), so a fault can be put in any one field, and the
batch's CRC is recomputed over the fault.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.compression import compress
from kafkapy.protocol.crc import crc32c
from kafkapy.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    MalformedRecordError,
    ProtocolError,
    RecordValidationError,
)
from kafkapy.protocol.record_walk import RecordChecks, walk_records
from kafkapy.protocol.records import Compression, decode_records, parse_batch_header
from kafkapy.storage import LogConfig, PartitionLog

pytestmark = pytest.mark.timeout(120)

BASE_TS = 1_700_000_000_000
CODECS = list(Compression)
_HEADER = struct.Struct(">qiibIhiqqqhii")


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _sized(value: bytes | None, size: int | None = None) -> bytes:
    if value is None:
        return _zigzag(-1 if size is None else size)
    return _zigzag(len(value) if size is None else size) + value


@dataclass
class Rec:
    """One record's fields, each of which a test may set to a wrong value."""

    offset_delta: int
    timestamp_delta: int = 0
    key: bytes | None = b"k"
    value: bytes | None = b"v"
    headers: list[tuple[bytes | None, bytes | None]] = field(default_factory=list)
    length_adjust: int = 0
    key_size: int | None = None
    header_count: int | None = None


def _record(r: Rec) -> bytes:
    body = b"".join([
        b"\x00",
        _zigzag(r.timestamp_delta),
        _zigzag(r.offset_delta),
        _sized(r.key, r.key_size),
        _sized(r.value),
        _zigzag(len(r.headers) if r.header_count is None else r.header_count),
        *(_sized(k) + _sized(v) for k, v in r.headers),
    ])
    return _zigzag(len(body) + r.length_adjust) + body


def _batch(
    region: bytes, count: int, codec: Compression = Compression.NONE, last_offset_delta: int | None = None,
    max_timestamp: int = BASE_TS,
) -> bytearray:
    """A v2 batch around `region` (uncompressed records), compressed with `codec`, CRC computed."""
    payload = compress(codec, region) if codec is not Compression.NONE else region
    out = bytearray(61 + len(payload))
    last = count - 1 if last_offset_delta is None else last_offset_delta
    _HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, int(codec), last, BASE_TS, max_timestamp,
                      -1, -1, -1, count)  # fmt: skip
    out[61:] = payload
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return out


def _walk(data: bytearray, checks: RecordChecks | None = None, **kw: int) -> int:
    header = parse_batch_header(data)
    assert crc32c(memoryview(data)[21:]) == header.crc  # the CRC is right: only the walk can tell
    return walk_records(data, 0, header, checks or RecordChecks(), **kw)


def _refused(data: bytearray) -> MalformedRecordError:
    with pytest.raises(MalformedRecordError) as info:
        _walk(data)
    assert info.value.error_code is ErrorCode.CORRUPT_MESSAGE
    assert isinstance(info.value, CorruptRecordError)
    return info.value


def _records(n: int) -> list[Rec]:
    return [Rec(i, i, value=b"v" * 30) for i in range(n)]


def _region(recs: list[Rec]) -> bytes:
    return b"".join(_record(r) for r in recs)


@pytest.mark.parametrize("codec", CODECS)
def test_valid_batches_walk_to_their_largest_timestamp(codec: Compression) -> None:
    recs = [Rec(0, 5, None, None), Rec(1, 300, b"k" * 200, b"v" * 5000, [(b"h", None), (b"i", b"x")]),
            Rec(2, -7, b"", b"")]  # fmt: skip
    assert _walk(_batch(_region(recs), 3, codec)) == BASE_TS + 300


@pytest.mark.parametrize("codec", CODECS)
def test_header_count_above_the_records_is_refused(codec: Compression) -> None:
    """The reported case: a header saying 3 records over 1 record."""
    error = _refused(_batch(_region(_records(1)), 3, codec))
    assert error.record_errors[0][0] in (0, 1)


@pytest.mark.parametrize("codec", CODECS)
def test_records_left_over_after_the_count_are_refused(codec: Compression) -> None:
    error = _refused(_batch(_region(_records(3)), 2, codec, last_offset_delta=1))
    assert error.record_errors == [(1, "Incorrect declared batch size, records still remaining in file")]


@pytest.mark.parametrize("codec", CODECS)
def test_random_record_bytes_under_a_correct_crc_are_refused(codec: Compression) -> None:
    garbage = bytes(range(200, 256)) * 4  # a long varint, then nothing record-shaped
    _refused(_batch(garbage, 1, codec))


@pytest.mark.parametrize(
    ("fault", "index", "message"),
    [
        (Rec(1, length_adjust=1), 1, "Invalid record size: expected to read 9 bytes in record payload, but instead read 8"),
        (Rec(1, length_adjust=-1), 1, "Invalid record size: expected to read 7 bytes in record payload, but instead read 8"),
        (Rec(1, length_adjust=500), 1, "Invalid record size: expected 508 bytes"),
        (Rec(0), 1, "Invalid offset delta 0"),
        (Rec(3), 1, "Invalid offset delta 3"),
        (Rec(1, key_size=-2), 1, "Invalid negative key size -2"),
        (Rec(1, header_count=-1), 1, "Found invalid number of record headers -1"),
        (Rec(1, header_count=1000), 1, "Found invalid number of record headers 1000"),
        (Rec(1, headers=[(None, b"v")]), 1, "Invalid negative header key size -1"),
        (Rec(1, key=b"x" * 20, key_size=2), 1, "Invalid record size"),
    ],
)
def test_each_malformed_field_is_refused_naming_the_record(fault: Rec, index: int, message: str) -> None:
    recs = [Rec(0), fault, Rec(2)]
    error = _refused(_batch(_region(recs), 3))
    assert error.record_errors[0][0] == index
    assert error.record_errors[0][1].startswith(message)
    assert error.reason == error.record_errors[0][1]


def test_overlong_and_out_of_range_varints_are_refused() -> None:
    bad_value_size = _record(Rec(0, value=None))[:-2] + b"\xff\xff\xff\xff\xff\x01" + b"\x00"
    body = bad_value_size[1:]
    _refused(_batch(_zigzag(len(body)) + body, 1))
    too_big = b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x00"  # value size > int32
    _refused(_batch(_zigzag(len(too_big)) + too_big, 1))


def test_a_truncated_region_is_a_premature_end() -> None:
    region = _region(_records(3))
    error = _refused(_batch(region[:-1], 3))
    assert error.record_errors[0][0] == 2


def test_the_decompression_bomb_cap_holds() -> None:
    data = _batch(_region([Rec(0, value=bytes(100_000))]), 1, Compression.ZSTD)
    with pytest.raises(InvalidRecordError, match="exceed the limit"):
        _walk(data, max_decompressed=50_000)


def test_keys_required_names_every_keyless_record() -> None:
    recs = [Rec(0, key=None), Rec(1), Rec(2, key=None)]
    checks = RecordChecks("c-0", require_key=True)
    with pytest.raises(RecordValidationError) as info:
        _walk(_batch(_region(recs), 3), checks)
    assert info.value.error_code is ErrorCode.INVALID_RECORD
    message = "Compacted topic cannot accept message without key in topic partition c-0."
    assert info.value.record_errors == [(0, message), (2, message)]


def test_timestamps_out_of_range_are_invalid_timestamp_and_unset_ones_are_not_judged() -> None:
    recs = [Rec(0, 0, key=None), Rec(1, 50), Rec(2, -BASE_TS - 1), Rec(3, -20)]
    checks = RecordChecks("t-0", require_key=True, min_timestamp=BASE_TS - 10, max_timestamp=BASE_TS + 10)
    with pytest.raises(RecordValidationError) as info:
        _walk(_batch(_region(recs), 4), checks)
    assert info.value.error_code is ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in info.value.record_errors] == [0, 1, 3]  # 0: its key; 2: timestamp -1
    assert info.value.record_errors[1][1].startswith(f"Timestamp {BASE_TS + 50} of message with offset delta 1")


# --- property: one fault at a time in a valid batch, any codec ----------------------------------

_bytes = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=64, max_size=300))
_recs = st.lists(
    st.builds(
        Rec,
        offset_delta=st.just(0),
        timestamp_delta=st.integers(-(2**40), 2**40),
        key=_bytes,
        value=_bytes,
        headers=st.lists(st.tuples(st.text(max_size=5).map(str.encode), _bytes), max_size=3),
    ),
    min_size=1,
    max_size=12,
)
FAULTS = ["drop", "extra", "length", "offset", "key_size", "header_count", "truncate", "count"]


def _corrupt(recs: list[Rec], fault: str, i: int, amount: int) -> tuple[bytes, int]:
    """The records region and header count with `fault` put in record `i` (`amount` > 0)."""
    n = len(recs)
    bad = list(recs)
    if fault == "drop":
        del bad[i]
    elif fault == "extra":
        bad.append(replace(recs[i], offset_delta=n))
    elif fault == "length":
        bad[i] = replace(recs[i], length_adjust=amount if amount % 2 else -amount)
    elif fault == "offset":
        bad[i] = replace(recs[i], offset_delta=i + amount if amount % 2 else -amount)
    elif fault == "key_size":
        bad[i] = replace(recs[i], key_size=-1 - amount)
    elif fault == "header_count":
        bad[i] = replace(recs[i], header_count=-amount)
    region = _region(bad)
    if fault == "truncate":
        return region[: -min(amount, len(region))], n
    return region, (n + amount if fault == "count" else n)


@given(recs=_recs, codec=st.sampled_from(CODECS), fault=st.sampled_from(FAULTS),
       at=st.integers(0, 100), amount=st.integers(1, 5))  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_any_single_fault_is_refused_and_the_valid_batch_walks(
    recs: list[Rec], codec: Compression, fault: str, at: int, amount: int
) -> None:
    recs = [replace(r, offset_delta=i) for i, r in enumerate(recs)]
    largest = _walk(_batch(_region(recs), len(recs), codec))
    assert largest == max(-1, *(BASE_TS + r.timestamp_delta for r in recs))
    i = at % len(recs)
    region, count = _corrupt(recs, fault, i, amount)
    error = _refused(_batch(region, count, codec))
    assert 0 <= error.record_errors[0][0] <= count


@given(recs=_recs, codec=st.sampled_from(CODECS), fault=st.sampled_from(FAULTS),
       at=st.integers(0, 100), amount=st.integers(1, 5))  # fmt: skip
@settings(max_examples=60, deadline=None)
def test_a_refused_append_answers_corrupt_message_and_leaves_the_log_unchanged(
    tmp_path_factory: pytest.TempPathFactory, recs: list[Rec], codec: Compression, fault: str, at: int,
    amount: int,
) -> None:
    plog = PartitionLog(Path(tmp_path_factory.mktemp("walk")) / "t-0", LogConfig())
    try:
        recs = [replace(r, offset_delta=i, timestamp_delta=0) for i, r in enumerate(recs)]
        plog.append(_batch(_region(recs), len(recs), codec), now_ms=BASE_TS)
        before = (plog.log_end_offset, plog.size_bytes, plog.read_bytes(0, 1 << 24))
        region, count = _corrupt(recs, fault, at % len(recs), amount)
        with pytest.raises(ProtocolError) as info:  # the header check may see a lying count first
            plog.append(_batch(region, count, codec), now_ms=BASE_TS)
        assert info.value.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD)
        assert (plog.log_end_offset, plog.size_bytes, plog.read_bytes(0, 1 << 24)) == before
    finally:
        plog.close()


@given(
    recs=_recs,
    codec=st.sampled_from(CODECS),
    require_key=st.booleans(),
    bounds=st.tuples(st.integers(-(2**41), 2**41), st.integers(0, 2**41)),
)
@settings(max_examples=200, deadline=None)
def test_the_rules_on_the_walk_match_the_decoded_records(
    recs: list[Rec], codec: Compression, require_key: bool, bounds: tuple[int, int]
) -> None:
    """The compacted-key and timestamp rules, applied on the walk, refuse exactly the records
    the decoded `Record` objects say they should, and the largest timestamp is theirs."""
    recs = [replace(r, offset_delta=i) for i, r in enumerate(recs)]
    data = _batch(_region(recs), len(recs), codec)
    low, high = BASE_TS + bounds[0], BASE_TS + bounds[0] + bounds[1]
    decoded = decode_records(data, 0, parse_batch_header(data))
    keyless = {i for i, r in enumerate(decoded) if require_key and r.key is None}
    stamps = [BASE_TS + r.timestamp_delta for r in decoded]
    late_or_early = {i for i, ts in enumerate(stamps) if ts >= 0 and not low <= ts <= high} - keyless
    checks = RecordChecks("t-0", require_key, low, high)
    if not keyless and not late_or_early:
        assert _walk(data, checks) == max(-1, *stamps)
        return
    with pytest.raises(RecordValidationError) as info:
        _walk(data, checks)
    assert {i for i, _ in info.value.record_errors} == keyless | late_or_early
    expected = ErrorCode.INVALID_TIMESTAMP if late_or_early else ErrorCode.INVALID_RECORD
    assert info.value.error_code is expected


def test_header_keys_are_not_judged_for_utf8_as_in_kafka() -> None:
    """Kafka's broker reads header keys leniently (Java replaces bad UTF-8), so a batch a Kafka
    broker takes is taken here too."""
    assert _walk(_batch(_region([Rec(0, headers=[(b"\xff\xfe", b"v")])]), 1)) == BASE_TS
