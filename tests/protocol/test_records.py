"""Record batches v2: build -> parse -> validate -> decode, patches, validation rules, fuzz."""

from __future__ import annotations

import contextlib
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.compression import Compression, UnsupportedCompressionError
from kafkapy.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    ProtocolError,
    UnsupportedVersionError,
)
from kafkapy.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
    parse_batch_header,
    parse_control_record,
    records_region,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
    validate_batch,
)

CODECS = list(Compression)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

blobs = st.none() | st.binary(max_size=64)
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)


@st.composite
def record_lists(draw: st.DrawFn, *, gaps: bool = False) -> list[Record]:
    n = draw(st.integers(1, 12))
    deltas = (
        sorted(draw(st.sets(st.integers(0, 1000), min_size=n, max_size=n)))
        if gaps
        else list(range(n))
    )
    return [
        Record(
            offset_delta=d,
            timestamp_delta=draw(st.integers(-(2**40), 2**40)),
            key=draw(blobs),
            value=draw(blobs),
            headers=draw(headers),
        )
        for d in deltas
    ]


def _fix_crc(buf: bytearray, pos: int = 0) -> None:
    """Re-seal a hand-edited batch so that a rule check, not the CRC, is what fails."""
    size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
    struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(bytes(buf[pos + 21 : pos + size])))


def _simple(**kw: object) -> bytearray:
    records = [Record(i, i, b"k%d" % i, b"v" * i, [("h", b"x")]) for i in range(3)]
    return bytearray(build_batch(records, base_timestamp=1_700_000_000_000, **kw))  # type: ignore[arg-type]


# --- round trips ---------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    records=record_lists(),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(-1, 2**41),
    producer=st.sampled_from([(-1, -1, -1), (7, 0, 0), (2**40, 3, 2**31 - 1)]),
    transactional=st.booleans(),
    leader_epoch=INT32,
)
def test_build_parse_validate_decode_round_trip(
    records: list[Record],
    codec: Compression,
    base_offset: int,
    base_timestamp: int,
    producer: tuple[int, int, int],
    transactional: bool,
    leader_epoch: int,
) -> None:
    pid, epoch, seq = producer
    transactional = transactional and pid >= 0
    batch = build_batch(
        records,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
        partition_leader_epoch=leader_epoch,
    )
    [(pos, header)] = list(iter_batches(batch))
    assert pos == 0
    assert header.size == len(batch)
    assert header.base_offset == base_offset
    assert header.partition_leader_epoch == leader_epoch
    assert header.magic == 2
    assert header.compression is codec
    assert header.timestamp_type == 0
    assert header.is_transactional is transactional
    assert header.is_control is False
    assert header.records_count == len(records)
    assert header.last_offset == base_offset + len(records) - 1
    assert header.base_timestamp == base_timestamp
    assert header.max_timestamp == base_timestamp + max(r.timestamp_delta for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    validate_batch(batch, 0, header)
    assert decode_records(batch, 0, header) == records


@settings(max_examples=40, deadline=None)
@given(records=record_lists(gaps=True), codec=st.sampled_from(CODECS))
def test_compacted_batches_round_trip_when_allowed(records: list[Record], codec: Compression) -> None:
    last = records[-1].offset_delta + 5
    batch = build_batch(records, base_timestamp=0, compression=codec, last_offset_delta=last)
    header = parse_batch_header(batch)
    assert header.last_offset_delta == last
    validate_batch(batch, 0, header, allow_compacted=True)
    assert decode_records(batch, 0, header) == records
    with pytest.raises(InvalidRecordError):
        validate_batch(batch, 0, header)  # a producer batch must have consecutive offsets


@settings(max_examples=60, deadline=None)
@given(
    timestamp_deltas=st.lists(INT64, min_size=1, max_size=4),
    first_offset=st.integers(0, 2**31 - 5),
    key_size=st.sampled_from([0, 63, 64, 8191, 8192, 70000]),
)
def test_varint_extremes_round_trip(
    timestamp_deltas: list[int], first_offset: int, key_size: int
) -> None:
    """Every varint width: full int64 timestamp deltas (up to 10 bytes), offset deltas near
    int32 max (5 bytes), lengths on both sides of the 1/2/3-byte boundaries."""
    records = [
        Record(first_offset + i, ts, b"k" * key_size, None, [("\u2603" * 3, b"v" * key_size)])
        for i, ts in enumerate(timestamp_deltas)
    ]
    batch = build_batch(records, base_timestamp=0, max_timestamp=0)
    header = parse_batch_header(batch)
    validate_batch(batch, 0, header, allow_compacted=True)
    assert decode_records(batch, 0, header) == records


def test_build_batch_out_of_range_header_field_is_value_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        build_batch([Record(0, 2**62)], base_timestamp=2**62)  # max timestamp overflows int64
    with pytest.raises(ValueError, match="out of range"):
        build_batch([Record(0, 0)], base_timestamp=0, producer_epoch=2**15)


def test_many_batches_in_one_buffer_at_their_positions() -> None:
    batches = [
        build_batch([Record(0, 0, None, b"%d" % i)], base_offset=i * 10, base_timestamp=i)
        for i in range(5)
    ]
    buf = b"".join(batches)
    found = list(iter_batches(memoryview(buf)))
    positions = [sum(len(b) for b in batches[:i]) for i in range(5)]
    assert [p for p, _ in found] == positions
    for i, (pos, header) in enumerate(found):
        assert header.base_offset == i * 10
        validate_batch(buf, pos, header)
        assert decode_records(buf, pos, header)[0].value == b"%d" % i
        assert bytes(records_region(buf, pos, header)) == batches[i][BATCH_HEADER_SIZE:]


def test_partial_tail() -> None:
    one = build_batch([Record(0, 0, b"k", b"v")], base_timestamp=0)
    buf = one + one[:30]
    assert [p for p, _ in iter_batches(buf, allow_partial_tail=True)] == [0]
    buf2 = one + one[:-1]
    assert [p for p, _ in iter_batches(buf2, allow_partial_tail=True)] == [0]
    for bad in (buf, buf2):
        with pytest.raises(CorruptRecordError):
            list(iter_batches(bad))
    assert list(iter_batches(b"")) == []


# --- patches -------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    offset=st.integers(0, 2**63 - 1),
    epoch=INT32,
    timestamp=INT64,
    log_append=st.booleans(),
    prefix=st.integers(0, 3),
)
def test_patches_keep_the_batch_valid(
    codec: Compression, offset: int, epoch: int, timestamp: int, log_append: bool, prefix: int
) -> None:
    before = build_batch([Record(0, 0, b"a", b"b"), Record(1, 5, None, b"c")],
                         base_timestamp=100, compression=codec)
    filler = build_batch([Record(0, 0, None, None)], base_timestamp=0)
    buf = bytearray(filler * prefix + before)
    pos = len(filler) * prefix
    view = memoryview(buf)
    set_base_offset(view, pos, offset)
    set_partition_leader_epoch(buf, pos, epoch)
    header = parse_batch_header(buf, pos)
    assert (header.base_offset, header.partition_leader_epoch) == (offset, epoch)
    assert header.crc == parse_batch_header(before).crc  # neither field is covered by the CRC
    validate_batch(buf, pos, header)

    set_max_timestamp(view, pos, timestamp, log_append)
    header = parse_batch_header(buf, pos)
    assert header.max_timestamp == timestamp
    assert header.timestamp_type == int(log_append)
    assert header.compression is codec  # other attribute bits untouched
    validate_batch(buf, pos, header)
    assert [r.value for r in decode_records(buf, pos, header)] == [b"b", b"c"]
    # Earlier batches are untouched.
    assert bytes(buf[:pos]) == filler * prefix

    set_max_timestamp(buf, pos, 5, False)  # back to CreateTime clears the bit
    header = parse_batch_header(buf, pos)
    assert header.timestamp_type == 0
    validate_batch(buf, pos, header)


def test_patches_refuse_positions_without_a_batch() -> None:
    buf = _simple()
    for pos in (-1, 1, len(buf)):
        with pytest.raises(CorruptRecordError):
            set_base_offset(buf, pos, 0)
        with pytest.raises(CorruptRecordError):
            set_max_timestamp(buf, pos, 0, True)


# --- validation rules ----------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_unsupported_version(magic: int) -> None:
    # A v0/v1 message set: offset, size, crc, then magic at the same byte 16.
    legacy = struct.pack(">qiIbb", 0, 14, 0, magic, 0) + b"\xff\xff\xff\xff" * 2
    with pytest.raises(UnsupportedVersionError) as info:
        list(iter_batches(legacy))
    assert info.value.error_code is ErrorCode.UNSUPPORTED_VERSION
    buf = _simple()
    buf[16] = magic
    with pytest.raises(UnsupportedVersionError):
        parse_batch_header(buf)


@pytest.mark.parametrize("magic", [3, 127, 255])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    buf = _simple()
    buf[16] = magic
    with pytest.raises(CorruptRecordError) as info:
        parse_batch_header(buf)
    assert info.value.error_code is ErrorCode.CORRUPT_MESSAGE


def test_crc_mismatch_is_corrupt_message() -> None:
    buf = _simple()
    buf[-1] ^= 0x01
    header = parse_batch_header(buf)
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(buf, 0, header)


def test_batch_length_inconsistent_with_buffer() -> None:
    buf = _simple()
    for length in (48, len(buf) - 11):
        bad = bytearray(buf)
        struct.pack_into(">i", bad, 8, length)
        with pytest.raises(CorruptRecordError):
            validate_batch(bad, 0, parse_batch_header(bad))
        with pytest.raises(CorruptRecordError):
            list(iter_batches(bad))


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "match"),
    [
        (57, ">i", 0, "0 records"),
        (57, ">i", -1, "-1 records"),
        (57, ">i", 4, "does not match"),
        (23, ">i", 5, "does not match"),
        (57, ">i", 100, "does not match"),
        (43, ">q", -2, "producer id"),
        (51, ">h", -2, "producer epoch"),
        (53, ">i", -2, "base sequence"),
    ],
)
def test_rule_breaks_are_invalid_record(offset: int, fmt: str, value: int, match: str) -> None:
    buf = _simple()
    struct.pack_into(fmt, buf, offset, value)
    _fix_crc(buf)
    with pytest.raises(InvalidRecordError, match=match) as info:
        validate_batch(buf, 0, parse_batch_header(buf))
    assert info.value.error_code is ErrorCode.INVALID_RECORD


def test_count_larger_than_region_can_hold() -> None:
    # Consistent header (count 1000, lastOffsetDelta 999) over a 3-record region.
    buf = _simple()
    struct.pack_into(">i", buf, 57, 1000)
    struct.pack_into(">i", buf, 23, 999)
    _fix_crc(buf)
    with pytest.raises(InvalidRecordError, match="cannot hold"):
        validate_batch(buf, 0, parse_batch_header(buf))


def test_producer_rules() -> None:
    buf = _simple(producer_id=5, producer_epoch=-1, base_sequence=0)
    with pytest.raises(InvalidRecordError, match="without a producer epoch"):
        validate_batch(buf, 0, parse_batch_header(buf))
    buf = _simple(is_transactional=True)
    with pytest.raises(InvalidRecordError, match="transactional"):
        validate_batch(buf, 0, parse_batch_header(buf))
    ok = _simple(producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    validate_batch(ok, 0, parse_batch_header(ok))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_is_unsupported_compression(codec_id: int) -> None:
    buf = _simple()
    buf[22] = (buf[22] & ~0x07) | codec_id
    _fix_crc(buf)
    header = parse_batch_header(buf)
    with pytest.raises(UnsupportedCompressionError) as info:
        validate_batch(buf, 0, header)
    assert info.value.error_code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(UnsupportedCompressionError):
        decode_records(buf, 0, header)


def test_compacted_rules() -> None:
    buf = _simple()
    struct.pack_into(">i", buf, 57, 0)  # every record cleaned away, batch kept
    _fix_crc(buf)
    validate_batch(buf, 0, parse_batch_header(buf), allow_compacted=True)
    struct.pack_into(">i", buf, 57, 4)  # more records than offsets
    _fix_crc(buf)
    with pytest.raises(InvalidRecordError):
        validate_batch(buf, 0, parse_batch_header(buf), allow_compacted=True)


# --- records region -----------------------------------------------------------------------


def _batch_with_region(region: bytes, count: int) -> bytearray:
    buf = _simple()
    del buf[BATCH_HEADER_SIZE:]
    buf += region
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, count - 1)
    _fix_crc(buf)
    return buf


def test_overlong_varints_are_rejected() -> None:
    # record length as a 6-byte varint (limit 5)
    region = b"\x8e\x80\x80\x80\x80\x00" + b"\x00\x00\x00\x01\x01\x00\x00"
    buf = _batch_with_region(region, 1)
    with pytest.raises(InvalidRecordError, match="longer than 5"):
        decode_records(buf, 0, parse_batch_header(buf))
    # timestamp delta as an 11-byte varlong (limit 10)
    body = b"\x00" + b"\x80" * 10 + b"\x00" + b"\x00\x01\x01\x00"
    buf = _batch_with_region(bytes([len(body) * 2]) + body, 1)
    with pytest.raises(InvalidRecordError, match="longer than 10"):
        decode_records(buf, 0, parse_batch_header(buf))
    # a 5-byte varint whose value needs more than 32 bits
    body = b"\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x01\x01\x00"
    buf = _batch_with_region(bytes([len(body) * 2]) + body, 1)
    with pytest.raises(InvalidRecordError, match="out of range"):
        decode_records(buf, 0, parse_batch_header(buf))


@pytest.mark.parametrize(
    ("region", "match"),
    [
        (b"\x0c\x00\x00\x00\x01\x01\x00\x00", "left over"),  # trailing byte after the record
        (b"\x0e\x00\x00\x00\x01\x01\x00\x00", "does not match"),  # length says 7, fields 6
        (b"\x0c\x00\x00\x00\x07\x01\x00", "key length"),  # key length -4
        (b"\x0c\x00\x00\x00\x01\x01\x02\x01\x02", "header"),  # header count 1, null key
        (b"\x0c\x00\x00\x02\x01\x01\x00", "offset delta"),  # offset delta 1 > lastOffsetDelta 0
    ],
)
def test_malformed_records_are_invalid(region: bytes, match: str) -> None:
    buf = _batch_with_region(region, 1)
    header = parse_batch_header(buf)
    with pytest.raises(InvalidRecordError, match=match):
        decode_records(buf, 0, header)


def test_header_key_must_be_utf8() -> None:
    good = build_batch([Record(0, 0, None, None, [("\u00e9", b"v")])], base_timestamp=0)
    bad = bytearray(good)
    bad[bad.index("\u00e9".encode()) + 1] = 0xFF
    _fix_crc(bad)
    with pytest.raises(InvalidRecordError, match="UTF-8"):
        decode_records(bad, 0, parse_batch_header(bad))


def test_out_of_order_offset_deltas_are_invalid() -> None:
    batch = bytearray(build_batch([Record(0, 0), Record(1, 0)], base_timestamp=0))
    # swap the offset deltas of the two records (byte 3 of each 7-byte record body + length)
    region = BATCH_HEADER_SIZE
    batch[region + 3], batch[region + 8 + 3] = batch[region + 8 + 3], batch[region + 3]
    _fix_crc(batch)
    with pytest.raises(InvalidRecordError, match="out of order"):
        decode_records(batch, 0, parse_batch_header(batch))


# --- fuzz: truncation and bit flips --------------------------------------------------------


def _full_pipeline(buf: bytes | bytearray) -> None:
    for pos, header in iter_batches(buf):
        validate_batch(buf, pos, header)
        decode_records(buf, pos, header)


FUZZ_BATCHES = {
    codec: build_batch(
        [Record(i, i * 3, b"key%d" % i, b"value" * i, [(f"h{i}", b"x")]) for i in range(6)],
        base_offset=42,
        base_timestamp=1_700_000_000_000,
        compression=codec,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
    )
    for codec in CODECS
}


@pytest.mark.parametrize("codec", CODECS)
def test_every_truncation_raises_only_protocol_errors(codec: Compression) -> None:
    batch = FUZZ_BATCHES[codec]
    two = batch + batch
    for cut in range(len(two)):
        piece = two[:cut]
        if cut in (0, len(batch)):
            _full_pipeline(piece)  # whole batches: fine
            continue
        with pytest.raises(CorruptRecordError):
            _full_pipeline(piece)
        # Without the framing checks too: decode on a header whose region is cut short.
        if BATCH_HEADER_SIZE <= cut < len(batch):
            with pytest.raises(ProtocolError):
                decode_records(piece, 0, parse_batch_header(piece))


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=3),
)
def test_bit_flips_in_crc_covered_bytes_are_corrupt(
    codec: Compression, flips: list[tuple[int, int]]
) -> None:
    batch = FUZZ_BATCHES[codec]
    buf = bytearray(batch)
    covered = len(buf) - 21
    for where, bit in flips:
        buf[21 + where % covered] ^= 1 << bit
    if buf == batch:
        return  # flips cancelled out
    header = parse_batch_header(buf)
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(buf, 0, header)


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=3),
    reseal=st.booleans(),
)
def test_bit_flips_anywhere_raise_only_protocol_errors(
    codec: Compression, flips: list[tuple[int, int]], reseal: bool
) -> None:
    """Flips anywhere, optionally with the CRC recomputed (a buggy client sealing garbage): the
    parsers may accept or raise a ProtocolError subclass, nothing else."""
    buf = bytearray(FUZZ_BATCHES[codec])
    for where, bit in flips:
        buf[where % len(buf)] ^= 1 << bit
    if reseal and len(buf) >= BATCH_HEADER_SIZE:
        buf[17:21] = struct.pack(">I", crc32c.crc32c(bytes(buf[21:])))
    try:
        header = parse_batch_header(buf)
    except ProtocolError:
        return
    for call in (
        lambda: list(iter_batches(buf, allow_partial_tail=True)),
        lambda: validate_batch(buf, 0, header),
        lambda: decode_records(buf, 0, header, max_decompressed=1 << 20),
        lambda: set_max_timestamp(buf, 0, 1, True),
    ):
        with contextlib.suppress(ProtocolError):
            call()


@settings(max_examples=200, deadline=None)
@given(region=st.binary(max_size=80), count=st.integers(-2, 12), codec=st.sampled_from(CODECS))
def test_random_records_regions_raise_only_protocol_errors(
    region: bytes, count: int, codec: Compression
) -> None:
    buf = _batch_with_region(region, count)
    buf[22] = (buf[22] & ~0x07) | codec
    _fix_crc(buf)
    header = parse_batch_header(buf)
    try:
        records = decode_records(buf, 0, header)
    except ProtocolError:
        return
    assert len(records) == count


# --- control batches ----------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_round_trip(commit: bool) -> None:
    batch = build_control_batch(
        commit, producer_id=77, producer_epoch=3, coordinator_epoch=12, base_offset=500,
        timestamp_ms=1_234,
    )
    header = parse_batch_header(batch)
    validate_batch(batch, 0, header)
    assert header.is_control
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, -1)
    assert (header.base_offset, header.records_count, header.base_timestamp) == (500, 1, 1_234)
    [record] = decode_records(batch, 0, header)
    assert record.key == struct.pack(">hh", 0, int(commit))
    assert record.value == struct.pack(">hi", 0, 12)
    assert parse_control_record(record) == (commit, 12)


@pytest.mark.parametrize(
    "record",
    [
        Record(0, 0, None, struct.pack(">hi", 0, 1)),
        Record(0, 0, b"\x00\x00", struct.pack(">hi", 0, 1)),
        Record(0, 0, struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1)),  # KRaft leader change
        Record(0, 0, struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1)),
        Record(0, 0, struct.pack(">hh", 0, 1), b"\x00\x00\x00"),
        Record(0, 0, struct.pack(">hh", 0, 1), None),
    ],
)
def test_bad_control_records(record: Record) -> None:
    with pytest.raises(InvalidRecordError):
        parse_control_record(record)


def test_newer_control_versions_read_by_prefix() -> None:
    record = Record(0, 0, struct.pack(">hh", 1, 0) + b"future", struct.pack(">hi", 1, 9) + b"++")
    assert parse_control_record(record) == (False, 9)


@pytest.mark.parametrize("codec", CODECS)
def test_empty_compacted_batch(codec: Compression) -> None:
    """The cleaner keeps an emptied batch so the producer's last sequence survives."""
    batch = build_batch([], base_offset=10, base_timestamp=5, last_offset_delta=3,
                        compression=codec, producer_id=1, producer_epoch=0, base_sequence=7)
    header = parse_batch_header(batch)
    assert (header.records_count, header.last_offset, header.max_timestamp) == (0, 13, 5)
    validate_batch(batch, 0, header, allow_compacted=True)
    assert decode_records(batch, 0, header) == []
    with pytest.raises(InvalidRecordError):
        validate_batch(batch, 0, header)


def test_build_batch_rejects_misuse() -> None:
    with pytest.raises(ValueError, match="at least one"):
        build_batch([], base_timestamp=0)
    with pytest.raises(ValueError, match="increase"):
        build_batch([Record(0, 0), Record(0, 0)], base_timestamp=0)
    with pytest.raises(ValueError, match="last_offset_delta"):
        build_batch([Record(0, 0), Record(1, 0)], base_timestamp=0, last_offset_delta=0)


def test_header_dataclass_fields_follow_the_wire_order() -> None:
    buf = bytes(_simple(base_offset=1, partition_leader_epoch=2, producer_id=3, producer_epoch=4,
                        base_sequence=5))
    header = parse_batch_header(buf)
    assert isinstance(header, BatchHeader)
    assert struct.unpack_from(">qiibIhiqqqhii", buf) == (
        header.base_offset, header.batch_length, header.partition_leader_epoch, header.magic,
        header.crc, header.attributes, header.last_offset_delta, header.base_timestamp,
        header.max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence,
        header.records_count,
    )
    assert (header.base_offset, header.partition_leader_epoch, header.producer_id) == (1, 2, 3)
