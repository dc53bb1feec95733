"""Kafka record batches (magic v2): header parse/build, validation, in-place patches, records.

Why the split between header work and record work: the broker's hot paths (produce, fetch,
replication, log recovery) only ever need the 61-byte batch header and a CRC32C over the batch,
so those stay per-batch (`struct` + the `crc32c` C extension over memoryviews, no copies) and the
records stay opaque bytes. Records are decoded (`decode_records`) only where a caller truly needs
them: coordinators loading internal topics, the log cleaner reading keys, tests.

The header is one precompiled `struct.Struct` rather than a construct schema: it is fixed-size
with no varints, and `perf/records_bench.py` measures about 1 us per parse against about 8 us
for the same 13 fields with construct compiled.

Batch layout (all big-endian; offsets into the batch):

    0  baseOffset i64        (not covered by the CRC: the broker assigns it)
    8  batchLength i32       (bytes after this field, so a batch is batchLength + 12 bytes)
   12  partitionLeaderEpoch i32 (not covered by the CRC: the broker stamps it)
   16  magic i8              (2; 0 and 1 are the legacy message-set formats, at the same offset)
   17  crc u32               (CRC32C of bytes 21..end)
   21  attributes i16        (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control)
   23  lastOffsetDelta i32
   27  baseTimestamp i64
   35  maxTimestamp i64
   43  producerId i64
   51  producerEpoch i16
   53  baseSequence i32
   57  recordsCount i32
   61  records (compressed as a whole when the codec is not NONE)

Errors: framing/CRC problems raise `CorruptRecordError` (CORRUPT_MESSAGE), rule breaks raise
`InvalidRecordError` (INVALID_RECORD), legacy magic raises `UnsupportedVersionError`; nothing
else escapes for any input bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kafkapy.protocol.compression import (
    Compression,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from kafkapy.protocol.crc import crc32c
from kafkapy.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedVersionError,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "DEFAULT_MAX_DECOMPRESSED",
    "LOG_OVERHEAD",
    "MAGIC",
    "BatchHeader",
    "Compression",
    "Record",
    "build_batch",
    "build_control_batch",
    "decode_records",
    "iter_batches",
    "parse_batch_header",
    "parse_control_record",
    "records_region",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "validate_batch",
]

MAGIC = 2
BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes of a batch not counted by batchLength."""

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024
"""Default cap on a batch's decompressed records region. Kafka's default batch limits are about
1 MiB compressed; 64 MiB allows a 64x ratio on the largest default batch while keeping a
decompression bomb from costing more than that much memory."""

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_LEADER_EPOCH_OFFSET = 12
_MAX_TIMESTAMP_OFFSET = 35
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

_MIN_RECORD_SIZE = 7
"""Smallest encoded record: length, attributes, timestampDelta, offsetDelta, keyLength,
valueLength and headerCount, one byte each."""

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

Buffer = bytes | bytearray | memoryview
WritableBuffer = bytearray | memoryview

assert _HEADER.size == BATCH_HEADER_SIZE


@dataclass(slots=True)
class BatchHeader:
    """The 61-byte v2 batch header, field for field; the records are not touched."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> Compression:
        """The codec; `UnsupportedCompressionError` for ids 5-7 (validate_batch rejects them)."""
        codec = self.attributes & _CODEC_MASK
        try:
            return Compression(codec)
        except ValueError:
            raise UnsupportedCompressionError(
                f"unsupported compression codec id {codec}"
            ) from None

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime (producer's clock), 1 = LogAppendTime (broker's clock)."""
        return (self.attributes & _TIMESTAMP_TYPE_BIT) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        """Whole batch in bytes, including baseOffset and batchLength."""
        return self.batch_length + LOG_OVERHEAD


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch. Timestamp and offset are deltas from the batch's base values."""

    offset_delta: int = 0
    timestamp_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# header: parse, iterate, validate, patch


def parse_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Read the batch header at `pos`. Checks only what is needed to trust the field layout:
    enough bytes and magic 2 (legacy magic 0/1 -> `UnsupportedVersionError`)."""
    available = len(buf) - pos
    if pos < 0 or available < 0:
        raise CorruptRecordError(f"batch position {pos} outside a buffer of {len(buf)} bytes")
    if available > _MAGIC_OFFSET:
        magic = buf[pos + _MAGIC_OFFSET]
        if magic in (0, 1):
            raise UnsupportedVersionError(
                f"legacy message format (magic {magic}) is not supported; use record batches v2"
            )
        if magic != MAGIC:
            raise CorruptRecordError(f"unknown record batch magic {magic}")
    if available < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch header needs {BATCH_HEADER_SIZE} bytes, {available} available"
        )
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def iter_batches(
    buf: Buffer, *, allow_partial_tail: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield `(position, header)` for each complete batch in `buf`, in order.

    Only framing is checked (header readable, batchLength sane and within the buffer); call
    `validate_batch` for CRC and rules. A trailing incomplete batch is an error unless
    `allow_partial_tail` (fetch responses may end mid-batch when cut at max_bytes).
    """
    end = len(buf)
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < BATCH_HEADER_SIZE and allow_partial_tail:
            return
        header = parse_batch_header(buf, pos)
        if header.batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch length {header.batch_length} is below the minimum "
                f"{_MIN_BATCH_LENGTH}"
            )
        size = header.batch_length + LOG_OVERHEAD
        if size > remaining:
            if allow_partial_tail:
                return
            raise CorruptRecordError(
                f"record batch of {size} bytes at position {pos} is truncated to {remaining}"
            )
        yield pos, header
        pos += size


def validate_batch(
    buf: Buffer, pos: int, header: BatchHeader, *, allow_compacted: bool = False
) -> None:
    """Check one batch as the broker must before accepting it, in O(1) Python plus one CRC pass.

    CorruptRecordError: magic, batchLength vs the buffer, CRC32C. InvalidRecordError: codec id
    (UNSUPPORTED_COMPRESSION_TYPE), recordsCount vs lastOffsetDelta, producer fields.

    A producer batch has consecutive offsets, so `lastOffsetDelta == recordsCount - 1` and
    `recordsCount >= 1`. `allow_compacted=True` (replication, log recovery: batches the log
    cleaner may have thinned) relaxes that to `0 <= recordsCount <= lastOffsetDelta + 1`.

    Records are not walked here (replication and log recovery need only this): the only records
    check is the O(1) one that catches a lying count: an uncompressed region must hold at least
    `recordsCount` minimal (7-byte) records, a compressed one must not be empty. Full
    well-formedness of a client's batch is `record_walk.walk_records`'s (one pass over the
    bytes, on the produce path), and `decode_records` checks it for callers that read records. Per-origin rules
    (clients may not send control batches; an idempotent client batch needs a base sequence)
    belong to the caller, which knows the origin; the header carries what it needs.
    """
    if header.magic != MAGIC:
        raise CorruptRecordError(f"unknown record batch magic {header.magic}")
    size = header.batch_length + LOG_OVERHEAD
    if header.batch_length < _MIN_BATCH_LENGTH or pos < 0 or pos + size > len(buf):
        raise CorruptRecordError(
            f"record batch length {header.batch_length} inconsistent with the buffer"
        )
    view = memoryview(buf)
    actual = crc32c(view[pos + _ATTRIBUTES_OFFSET : pos + size])
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch: header {header.crc:#010x}, computed {actual:#010x}"
        )
    codec = header.compression  # raises UnsupportedCompressionError for 5-7
    count = header.records_count
    if allow_compacted:
        if count < 0 or header.last_offset_delta < 0 or count > header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"records count {count} inconsistent with last offset delta "
                f"{header.last_offset_delta}"
            )
    else:
        if count < 1:
            raise InvalidRecordError(f"record batch with {count} records")
        if header.last_offset_delta != count - 1:
            raise InvalidRecordError(
                f"last offset delta {header.last_offset_delta} does not match "
                f"{count} records"
            )
    region = size - BATCH_HEADER_SIZE
    if codec is Compression.NONE:
        if region < _MIN_RECORD_SIZE * count:
            raise InvalidRecordError(f"{region} bytes cannot hold {count} records")
    elif region == 0 and count > 0:
        raise InvalidRecordError("compressed record batch with an empty records region")
    _validate_producer_fields(header)


def _validate_producer_fields(header: BatchHeader) -> None:
    if header.producer_id < -1:
        raise InvalidRecordError(f"invalid producer id {header.producer_id}")
    if header.producer_epoch < -1:
        raise InvalidRecordError(f"invalid producer epoch {header.producer_epoch}")
    if header.base_sequence < -1:
        raise InvalidRecordError(f"invalid base sequence {header.base_sequence}")
    if header.producer_id >= 0 and header.producer_epoch < 0:
        raise InvalidRecordError(f"producer id {header.producer_id} without a producer epoch")
    if header.is_transactional and header.producer_id < 0:
        raise InvalidRecordError("transactional record batch without a producer id")


def _batch_size_at(buf: Buffer, pos: int) -> int:
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"no record batch header at position {pos}")
    (length,) = _I32.unpack_from(buf, pos + 8)
    size: int = length + LOG_OVERHEAD
    if length < _MIN_BATCH_LENGTH or pos + size > len(buf):
        raise CorruptRecordError(f"record batch length {length} inconsistent with the buffer")
    return size


def set_base_offset(buf: WritableBuffer, pos: int, base_offset: int) -> None:
    """Stamp the broker-assigned base offset in place (outside the CRC, so no recompute)."""
    _batch_size_at(buf, pos)
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place (outside the CRC, so no recompute)."""
    _batch_size_at(buf, pos)
    _I32.pack_into(buf, pos + _LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(buf: WritableBuffer, pos: int, timestamp: int, log_append_time: bool) -> None:
    """Rewrite maxTimestamp and the timestamp-type bit in place, then recompute the CRC.

    Used for topics with `message.timestamp.type=LogAppendTime`. The CRC is rewritten blindly,
    so validate the batch first or a corrupt batch would be blessed.
    """
    size = _batch_size_at(buf, pos)
    (attributes,) = _I16.unpack_from(buf, pos + _ATTRIBUTES_OFFSET)
    if log_append_time:
        attributes |= _TIMESTAMP_TYPE_BIT
    else:
        attributes &= ~_TIMESTAMP_TYPE_BIT
    _I16.pack_into(buf, pos + _ATTRIBUTES_OFFSET, attributes)
    _I64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, timestamp)
    crc = crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : pos + size])
    _U32.pack_into(buf, pos + _CRC_OFFSET, crc)


def records_region(buf: Buffer, pos: int, header: BatchHeader) -> memoryview:
    """The records bytes of the batch at `pos` (still compressed), as a view without copying."""
    size = header.batch_length + LOG_OVERHEAD
    if header.batch_length < _MIN_BATCH_LENGTH or pos < 0 or pos + size > len(buf):
        raise CorruptRecordError(
            f"record batch length {header.batch_length} inconsistent with the buffer"
        )
    return memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + size]


# ---------------------------------------------------------------------------------------------
# records: decode


def _malformed(what: str) -> InvalidRecordError:
    return InvalidRecordError(f"malformed record: {what}")


def _read_varint(data: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Zigzag varint at `pos`; at most `max_bytes` bytes (5 for int32, 10 for int64)."""
    if pos >= end:
        raise _malformed("truncated varint")
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    pos += 1
    if pos < end:  # two-byte fast path: lengths and deltas up to 8191 (most records)
        b = data[pos]
        if b < 0x80:
            raw |= b << 7
            return (raw >> 1) ^ -(raw & 1), pos + 1
    shift = 7
    limit = end if end - pos < max_bytes - 1 else pos + max_bytes - 1
    while True:
        if pos >= limit:
            if limit == end:
                raise _malformed("truncated varint")
            raise _malformed(f"varint longer than {max_bytes} bytes")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if raw >> (32 if max_bytes == 5 else 64):
        raise _malformed("varint out of range")
    return (raw >> 1) ^ -(raw & 1), pos


def _read_bytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos, end, 5)
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise _malformed(f"{what} length {length} out of bounds")
    return data[pos : pos + length], pos + length


def _decode_one(data: bytes, pos: int, end: int) -> tuple[Record, int]:
    length, pos = _read_varint(data, pos, end, 5)
    if length < _MIN_RECORD_SIZE - 1 or length > end - pos:
        raise _malformed(f"record length {length} out of bounds")
    rec_end = pos + length
    pos += 1  # attributes: unused by magic v2
    timestamp_delta, pos = _read_varint(data, pos, rec_end, 10)
    offset_delta, pos = _read_varint(data, pos, rec_end, 5)
    key, pos = _read_bytes(data, pos, rec_end, "key")
    value, pos = _read_bytes(data, pos, rec_end, "value")
    count, pos = _read_varint(data, pos, rec_end, 5)
    if count < 0 or count * 2 > rec_end - pos:
        raise _malformed(f"header count {count} out of bounds")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        raw_key, pos = _read_bytes(data, pos, rec_end, "header key")
        if raw_key is None:
            raise _malformed("null header key")
        try:
            header_key = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            raise _malformed("header key is not UTF-8") from None
        header_value, pos = _read_bytes(data, pos, rec_end, "header value")
        headers.append((header_key, header_value))
    if pos != rec_end:
        raise _malformed(f"record length {length} does not match its fields")
    return Record(offset_delta, timestamp_delta, key, value, headers), pos


def decode_records(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[Record]:
    """Decompress (bounded by `max_decompressed`) and decode every record of the batch at `pos`.

    Checks full well-formedness: exactly `recordsCount` records filling the region, each
    record's length matching its fields, bounded varints, offset deltas strictly increasing
    within `[0, lastOffsetDelta]`. Does not check the CRC (that is `validate_batch`).
    """
    region = records_region(buf, pos, header)
    count = header.records_count
    if count < 0:
        raise InvalidRecordError(f"record batch with {count} records")
    codec = header.compression
    if codec is Compression.NONE:
        data = bytes(region)
    else:
        data = decompress(codec, region, max_decompressed)
    end = len(data)
    if count * _MIN_RECORD_SIZE > end:
        raise InvalidRecordError(f"{end} bytes cannot hold {count} records")
    records: list[Record] = []
    at = 0
    previous = -1
    for _ in range(count):
        record, at = _decode_one(data, at, end)
        if record.offset_delta <= previous or record.offset_delta > header.last_offset_delta:
            raise InvalidRecordError(
                f"record offset delta {record.offset_delta} out of order or beyond the batch"
            )
        previous = record.offset_delta
        records.append(record)
    if at != end:
        raise InvalidRecordError(f"{end - at} bytes left over after {count} records")
    return records


# ---------------------------------------------------------------------------------------------
# build


_ONE_BYTE_VARINTS = [bytes((i,)) for i in range(0x80)]


def _zigzag(value: int) -> bytes:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    if raw < 0x80:
        return _ONE_BYTE_VARINTS[raw]
    if raw < 0x4000:
        return bytes(((raw & 0x7F) | 0x80, raw >> 7))
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _encode_bytes(value: bytes | None) -> bytes:
    if value is None:
        return _zigzag(-1)
    return _zigzag(len(value)) + value


def _encode_record(record: Record) -> bytes:
    if not _INT64_MIN <= record.timestamp_delta <= _INT64_MAX:
        raise ValueError(f"timestamp delta {record.timestamp_delta} out of range")
    parts = [
        b"\x00",
        _zigzag(record.timestamp_delta),
        _zigzag(record.offset_delta),
        _encode_bytes(record.key),
        _encode_bytes(record.value),
        _zigzag(len(record.headers)),
    ]
    for header_key, header_value in record.headers:
        parts.append(_encode_bytes(header_key.encode("utf-8")))
        parts.append(_encode_bytes(header_value))
    body = b"".join(parts)
    return _zigzag(len(body)) + body


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int,
    compression: Compression | int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode a complete v2 batch (CRC included) from `records`, deltas taken as given.

    For tests, the coordinators' internal-topic writes, control batches and the log cleaner.
    Offset deltas must be strictly increasing from 0 or more; `last_offset_delta` defaults to
    the last record's (pass a larger one for a compacted batch). An empty `records` list is
    allowed only with an explicit `last_offset_delta`: the cleaner keeps such empty batches to
    remember a producer's last sequence. `max_timestamp` defaults to base_timestamp + the
    largest timestamp delta. Misuse raises ValueError (our own arguments, not peer bytes).
    """
    codec = Compression(compression)
    last_offset_delta = _checked_last_offset_delta(records, last_offset_delta)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    payload = b"".join(_encode_record(r) for r in records)
    if codec is not Compression.NONE:
        payload = compress(codec, payload)
    attributes = (
        int(codec)
        | (_TIMESTAMP_TYPE_BIT if log_append_time else 0)
        | (_TRANSACTIONAL_BIT if is_transactional else 0)
        | (_CONTROL_BIT if is_control else 0)
    )
    out = bytearray(BATCH_HEADER_SIZE + len(payload))
    try:
        _HEADER.pack_into(
            out,
            0,
            base_offset,
            len(out) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    except struct.error as exc:
        raise ValueError(f"batch header field out of range: {exc}") from None
    out[BATCH_HEADER_SIZE:] = payload
    _U32.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _checked_last_offset_delta(records: Sequence[Record], last_offset_delta: int | None) -> int:
    """The batch's last offset delta (the last record's unless given); raises ValueError when
    the deltas do not increase from 0 within int32 or the given value is below the last one."""
    if not records and last_offset_delta is None:
        raise ValueError("a record batch needs at least one record (or a last_offset_delta)")
    previous = -1
    for record in records:
        if not previous < record.offset_delta <= _INT32_MAX:
            raise ValueError(
                f"offset deltas must increase from 0 within int32, got {record.offset_delta}"
            )
        previous = record.offset_delta
    if last_offset_delta is None:
        return previous
    if last_offset_delta < previous:
        raise ValueError("last_offset_delta below the last record's offset delta")
    return last_offset_delta


# ---------------------------------------------------------------------------------------------
# control records (transaction markers)

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def build_control_batch(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp_ms: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch: one control record, key = (version 0, type 1 commit /
    0 abort), value = (version 0, coordinator epoch). Transactional, no base sequence."""
    record = Record(
        offset_delta=0,
        timestamp_delta=0,
        key=_CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        base_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_control_record(record: Record) -> tuple[bool, int]:
    """`(commit, coordinator_epoch)` of a transaction marker record.

    Newer key/value versions are read by their version-0 prefix, as Kafka does for forward
    compatibility; a control type other than commit/abort (e.g. KRaft's) is an error here.
    """
    key, value = record.key, record.value
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise InvalidRecordError(f"control record type {kind} is not a transaction marker")
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise InvalidRecordError("transaction marker value shorter than 6 bytes")
    value_version, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    if value_version < 0:
        raise InvalidRecordError(f"invalid transaction marker version {value_version}")
    return kind == CONTROL_COMMIT, coordinator_epoch

