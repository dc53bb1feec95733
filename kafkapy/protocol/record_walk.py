"""One pass over a v2 record batch's records as bytes: Kafka's LogValidator record checks.

Why: the CRC only proves the bytes are the producer's, not that they are records. A batch whose
header says 3 records but holds 1, or whose records are random bytes under a correct CRC, would
be acknowledged and then break every consumer (kafka-python raises CorruptRecordError on every
fetch, kcat hangs). Kafka's LogValidator iterates every record of a client batch (decompressing
a compressed one) before the append; `walk_records` does the same without building a single
record object, since it runs per record on the produce path.

What one walk proves (any failure -> `MalformedRecordError`, CORRUPT_MESSAGE, naming the record
by its index in the batch):

- exactly `recordsCount` records fill the records region (decompressed under
  `max_decompressed`, the decompression-bomb cap), nothing left over;
- each record's length varint matches its fields; every varint is well-formed (at most 5 bytes,
  10 for the timestamp delta);
- offset deltas are 0, 1, 2... (a producer's batch is dense: `lastOffsetDelta` is
  `recordsCount - 1`, else InvalidRecordError as in `validate_batch`);
- key and value lengths are -1 (null) or fit the record; header count >= 0, header keys non-null
  and header values -1 or within the record.

And, in the same pass, the rules of a topic's config (`RecordChecks`): keys required (a compacted
topic, INVALID_RECORD) and record timestamps within a range (CreateTime topics,
INVALID_TIMESTAMP); those name every refused record, as Kafka does, in `RecordValidationError`.
The walk returns the records' largest timestamp, which the broker stores as the batch's
`maxTimestamp` (Kafka recomputes it from the records).

Cost: the per-record loop exists twice. `python_loop`, the reference, reads integers straight
from the buffer (no slicing, one- and two-byte varints inline) and costs about 1.6 us per record
(CPU time on the 2-core test machine: 68 us for 64 records of 1 KiB, 1.7 ms for 1,000 of
100 B), which costs the produce path a third of its throughput. The C loop
(`_record_walk.c`, built by setup.py where a compiler exists, `ACCELERATED`) gives the same
answers for any bytes (tests/protocol/test_record_walk_c.py) in 2.6 us and 10 us for those
batches, 10-20 ns per record. A batch at the decompression cap (64 MiB of records, 580k records
of 100 B) takes 0.15 s of CPU to decompress and 10 ms to walk in C (seconds in Python); the C
loop walks a region over 1 MiB without the GIL, so a caller on an event loop can hand a large
compressed batch to a worker thread: `walk_records` is a plain function with no shared state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkapy.protocol.compression import Compression, decompress
from kafkapy.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    MalformedRecordError,
    RecordValidationError,
)
from kafkapy.protocol.records import (
    BATCH_HEADER_SIZE,
    DEFAULT_MAX_DECOMPRESSED,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
)

__all__ = [
    "ACCELERATED", "NO_TIMESTAMP_LIMIT", "RecordChecks", "c_loop", "python_loop", "walk_records"
]

NO_TIMESTAMP_LIMIT = 1 << 80
"""A bound no int64 timestamp reaches: `RecordChecks` without a timestamp rule uses it."""

_MIN_RECORD_BODY = 6
"""Smallest record after its length varint: attributes, timestampDelta, offsetDelta, keyLength,
valueLength and headerCount, one byte each."""

_NO_DELTA = -(1 << 63)
"""The smallest timestamp delta (an int64): the largest delta before a record is read, which
`base + _NO_DELTA` turns into no timestamp (-1)."""

_VARINT_RANGE = "Varint is out of range"

_Limits = tuple[bool, int, int]
_Walked = tuple[int, int, list[int], list[tuple[int, int]]]
_Loop = Callable[[Buffer, int, int, int, _Limits], _Walked]

_KEYLESS = "Compacted topic cannot accept message without key in topic partition {}."


@dataclass(frozen=True, slots=True)
class RecordChecks:
    """The per-record rules of a topic: `require_key` (compacted), and record timestamps within
    `[min_timestamp, max_timestamp]` (a record without a timestamp, -1, is not judged).
    `partition` ("topic-N") goes into the messages, as in Kafka's."""

    partition: str = ""
    require_key: bool = False
    min_timestamp: int = -NO_TIMESTAMP_LIMIT
    max_timestamp: int = NO_TIMESTAMP_LIMIT


_NO_CHECKS = RecordChecks()


def walk_records(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    checks: RecordChecks = _NO_CHECKS,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    *,
    loop: _Loop | None = None,
) -> int:
    """Walk every record of the framed batch at `pos` (see the module docstring); return the
    largest record timestamp (-1 when no record has one).

    Raises `MalformedRecordError` (CORRUPT_MESSAGE) for the first malformed record,
    `RecordValidationError` (INVALID_RECORD / INVALID_TIMESTAMP) naming every record that breaks
    `checks`, and what `decompress` raises for a compressed region that does not inflate or
    exceeds `max_decompressed`. The CRC is `validate_batch`'s, not checked here.

    `loop` is the per-record loop: the C one when built (`ACCELERATED`), else `python_loop`,
    the reference; the tests pass either to hold them to the same answers."""
    loop = loop or _LOOP
    count = header.records_count
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"last offset delta {header.last_offset_delta} does not match {count} records"
        )
    start = pos + BATCH_HEADER_SIZE
    end = pos + header.batch_length + LOG_OVERHEAD
    data: Buffer = buf
    codec = header.compression
    if codec is not Compression.NONE:
        data = decompress(codec, memoryview(buf)[start:end], max_decompressed)
        start, end = 0, len(data)
    if count < 0 or count * (_MIN_RECORD_BODY + 1) > end - start:
        raise MalformedRecordError(0, f"{end - start} bytes cannot hold {count} records")
    base = header.base_timestamp
    limits = (checks.require_key, checks.min_timestamp - base, checks.max_timestamp - base)
    at, largest, keyless, out_of_range = loop(data, start, end, count, limits)
    if at != end:
        raise MalformedRecordError(
            max(count - 1, 0), "Incorrect declared batch size, records still remaining in file"
        )
    if keyless or out_of_range:
        _refuse(checks, base, keyless, out_of_range)
    return max(-1, base + largest)


def python_loop(data: Buffer, at: int, end: int, count: int, checks: _Limits) -> _Walked:
    """The per-record loop, and the reference for the C one: the position after the last
    record, the largest timestamp delta (`_NO_DELTA` if none), the indexes of the records
    without a key (when `checks`, (keys required, lowest and highest timestamp delta), requires
    one) and (index, timestamp delta) of those outside the range.

    Varints of one byte are decoded inline, and of two for the record and value lengths and the
    offset delta (1 KiB values, batches of up to 8192 records); longer ones by `_varint`. Fields
    are not bounds-checked one by one: positions only grow, so a field that overruns its record
    ends past it and fails the final length check, and a read past the buffer (IndexError) is a
    premature end. Written out flat because it runs per record on the produce path."""
    keyless: list[int] = []
    out_of_range: list[tuple[int, int]] = []
    (require_key, low, high), largest = checks, _NO_DELTA
    try:
        for index in range(count):
            length = -1
            v = data[at]
            if v < 0x80:
                at += 1
            elif data[at + 1] < 0x80:
                v = (v & 0x7F) | (data[at + 1] << 7)
                at += 2
            else:
                v, at = _varint(data, at, 5, index)
            length = (v >> 1) ^ -(v & 1)
            if length < _MIN_RECORD_BODY or length > end - at:
                raise MalformedRecordError(index, _size_message(length, end - at))
            v = data[at + 1]  # timestamp delta, after the attributes (unused in magic v2)
            delta, p = ((v >> 1) ^ -(v & 1), at + 2) if v < 0x80 else _deltas(data, at + 1, index)
            v = data[p]  # offset delta: the record's index in a producer's batch
            if v < 0x80:
                p += 1
            elif data[p + 1] < 0x80:
                v = (v & 0x7F) | (data[p + 1] << 7)
                p += 2
            else:
                v, p = _varint(data, p, 5, index)
            if v != index << 1:
                raise MalformedRecordError(index, _offset_message(v, index))
            v = data[p]  # key length
            if v > 0x7F:
                v, p = _varint(data, p, 5, index)
            else:
                p += 1
            if v & 1:
                _null_key(v, index, require_key, keyless)
            else:
                p += v >> 1
            v = data[p]  # value length
            if v < 0x80:
                p += 1
            elif data[p + 1] < 0x80:
                v = (v & 0x7F) | (data[p + 1] << 7)
                p += 2
            else:
                v, p = _varint(data, p, 5, index)
            if not v & 1:
                p += v >> 1
            elif v != 1:
                raise MalformedRecordError(index, _negative_size("value", v))
            p = _skip_headers(data, p, at + length, index) if data[p] else p + 1
            if p != at + length:
                raise MalformedRecordError(index, _size_message(length, p - at, read=True))
            at = p
            largest = delta if delta > largest else largest
            if delta < low or delta > high:
                out_of_range.append((index, delta))
    except IndexError:
        raise MalformedRecordError(index, _overrun_message(length)) from None
    return at, largest, keyless, out_of_range


def _deltas(data: Buffer, p: int, index: int) -> tuple[int, int]:
    """(timestamp delta, position of the offset delta) for a timestamp delta over a byte."""
    raw, p = _varint(data, p, 10, index)
    return (raw >> 1) ^ -(raw & 1), p


def _null_key(raw: int, index: int, require_key: bool, keyless: list[int]) -> None:
    """A record whose key length is negative: null (-1) is noted if keys are required, any
    other negative length is malformed."""
    if raw != 1:
        raise MalformedRecordError(index, _negative_size("key", raw))
    if require_key:
        keyless.append(index)


def _negative_size(what: str, raw: int) -> str:
    return f"Invalid negative {what} size {-(raw + 1) >> 1}"


def _varint(data: Buffer, p: int, max_bytes: int, index: int) -> tuple[int, int]:
    """The raw (still zigzag) varint at `p` of at most `max_bytes` bytes, and the position
    after it (`IndexError` past the buffer)."""
    raw = 0
    shift = 0
    for at in range(p, p + max_bytes):
        b = data[at]
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            if raw >> (32 if max_bytes == 5 else 64):
                raise MalformedRecordError(index, _VARINT_RANGE)
            return raw, at + 1
        shift += 7
    raise MalformedRecordError(index, _too_long(max_bytes))


def _skip_headers(data: Buffer, p: int, record_end: int, index: int) -> int:
    """The position after a record's headers (count at `p`): non-null keys, values -1 or sized."""
    raw, p = _varint(data, p, 5, index)
    count = (raw >> 1) ^ -(raw & 1)
    if count < 0 or count * 2 > record_end - p:
        raise MalformedRecordError(index, _header_count_message(count))
    for _ in range(count):
        raw, p = _varint(data, p, 5, index)
        if raw & 1:
            raise MalformedRecordError(index, _negative_size("header key", raw))
        raw, p = _varint(data, p + (raw >> 1), 5, index)
        if raw & 1:
            if raw != 1:
                raise MalformedRecordError(index, _negative_size("header value", raw))
        else:
            p += raw >> 1
        if p > record_end:
            break  # the record's length check names the overrun
    return p


def _too_long(max_bytes: int) -> str:
    return f"Varint is too long, more than {max_bytes} bytes"


def _header_count_message(count: int) -> str:
    return f"Found invalid number of record headers {count}"


def _size_message(length: int, available: int, *, read: bool = False) -> str:
    if read:
        return (
            f"Invalid record size: expected to read {length} bytes in record payload, "
            f"but instead read {available}"
        )
    if length < _MIN_RECORD_BODY:
        return f"Invalid record size {length}: a record has at least {_MIN_RECORD_BODY} bytes"
    return (
        f"Invalid record size: expected {length} bytes in record payload, but instead the "
        f"buffer has only {available} remaining bytes."
    )


def _overrun_message(length: int) -> str:
    """A read past the buffer: in a record's length, or in fields that run past the record."""
    if length < 0:
        return "Incorrect declared batch size, premature EOF reached"
    return f"Invalid record size: expected to read {length} bytes in record payload, but its fields run past them"


def _offset_message(raw: int, index: int) -> str:
    offset = (raw >> 1) ^ -(raw & 1)
    return (
        f"Invalid offset delta {offset} of record {index}: a producer's batch numbers its "
        f"records 0, 1, 2... in order"
    )


_FAULT_MESSAGES: list[Callable[[int, int, int], str]] = [
    lambda _, length, _extra: _overrun_message(length),
    lambda _, length, available: _size_message(length, available),
    lambda _, length, read: _size_message(length, read, read=True),
    lambda index, raw, _: _offset_message(raw, index),
    lambda _, raw, _extra: _negative_size("key", raw),
    lambda _, raw, _extra: _negative_size("value", raw),
    lambda *_: _VARINT_RANGE,
    lambda _, max_bytes, _extra: _too_long(max_bytes),
    lambda _, count, _extra: _header_count_message(count),
    lambda _, raw, _extra: _negative_size("header key", raw),
    lambda _, raw, _extra: _negative_size("header value", raw),
]
"""The messages of the C loop's fault kinds (`_record_walk.c`'s enum, in its order): the Python
loop's, from the same functions."""


def _accelerated_loop() -> _Loop | None:
    """The C loop (`_record_walk.c`) behind `python_loop`'s signature, or None where the package
    was installed without it (no compiler): its faults become the same `MalformedRecordError`."""
    try:
        from kafkapy.protocol._record_walk import RecordFault, walk
    except ImportError:
        return None

    def c_loop(data: Buffer, at: int, end: int, count: int, checks: _Limits) -> _Walked:
        try:
            return walk(data, at, end, count, *checks)
        except RecordFault as fault:
            index, kind, value, extra = fault.args
            raise MalformedRecordError(index, _FAULT_MESSAGES[kind](index, value, extra)) from None

    return c_loop


c_loop = _accelerated_loop()
"""The C per-record loop, None if the extension is not built."""

ACCELERATED = c_loop is not None
_LOOP: _Loop = c_loop or python_loop


def _refuse(
    checks: RecordChecks, base: int, keyless: list[int], out_of_range: list[tuple[int, int]]
) -> None:
    """Raise Kafka's RecordValidationException for the records that break `checks`: a key
    error first, else the timestamp error, one per record; INVALID_TIMESTAMP if any timestamp
    is refused. A record without a timestamp (-1) is never out of range."""
    errors: dict[int, str] = dict.fromkeys(keyless, _KEYLESS.format(checks.partition))
    bad_time = False
    for index, delta in out_of_range:
        ts = base + delta
        if ts >= 0 and index not in errors:
            bad_time = True
            errors[index] = (
                f"Timestamp {ts} of message with offset delta {index} is out of range. The "
                f"timestamp should be within [{checks.min_timestamp}, {checks.max_timestamp}]"
            )
    if errors:
        code = ErrorCode.INVALID_TIMESTAMP if bad_time else ErrorCode.INVALID_RECORD
        raise RecordValidationError(code, sorted(errors.items()))
