"""Produce fast path: Produce v3-v11 requests read and their usual answers written with
`struct` at integer offsets, beside the generic codec (`codec`), which dispatches here first.

Why: with many partitions librdkafka sends about one partition batch per Produce request, so
the broker pays the request's fixed cost per batch; the generic codec reads each of its ~20
fields through Python stream calls (~45 us of a ~150 us request, perf/request_cost.py). The
record batches stay views of the frame (never copied, never parsed here: the log validates them
per batch).

It never decides anything on its own: any input it does not fully understand - a truncation, a
negative or null length where the schema forbids it, a tagged field, a multi-byte count, bad
UTF-8 - makes it return None and the generic codec decodes (or rejects) the frame, so its
answers are the generic codec's by construction (and by property test,
tests/protocol/test_produce_fast.py). Likewise an answer it cannot write as the generic codec
would (record errors, a current leader, tagged fields, a value out of range) is left to it.
"""

from __future__ import annotations

import struct

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.headers import RequestHeader
from kafkapy.protocol.messages import ProduceRequest, ProduceResponse
from kafkapy.protocol.messages.produce import (
    ProduceRequest_TopicProduceData,
    ProduceResponse_TopicProduceResponse,
)
from kafkapy.protocol.primitives import uvarint_bytes

__all__ = [
    "PRODUCE_FAST_VERSIONS",
    "FastPathFallback",
    "decode_produce_request",
    "encode_produce_response",
    "read_count",
    "read_uvarint",
]


_P_HHI = struct.Struct(">hhi")
_P_H = struct.Struct(">h")
_P_I = struct.Struct(">i")
_P_HI = struct.Struct(">hi")
#: Produce versions the fast path reads: v3 (record batches, transactional_id) to v11.
PRODUCE_FAST_VERSIONS = range(3, 12)


class FastPathFallback(Exception):
    """Input a fast path (this one, `fetch_fast`) leaves to the generic codec."""


def read_uvarint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """(value, next position); at most 5 bytes / 32 bits, as `r_uvarint`."""
    result = 0
    for i in range(5):
        byte = buf[pos + i]  # IndexError past the end -> fallback
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if result > 0xFFFFFFFF:
                raise FastPathFallback
            return result, pos + i + 1
    raise FastPathFallback


def decode_produce_request(
    frame: bytes | bytearray,
) -> tuple[RequestHeader, ProduceRequest] | None:
    """`decode_request(frame)` for Produce v3-v11, or None for the generic codec to handle."""
    try:
        return _decode_produce(frame)
    except (FastPathFallback, struct.error, IndexError, UnicodeDecodeError):
        return None


def _decode_produce(buf: bytes | bytearray) -> tuple[RequestHeader, ProduceRequest]:
    """The request header and Produce's top-level fields; `_decode_topic_data` reads the
    batches. Strings are read inline, not through a helper: this runs once per request."""
    end = len(buf)
    api_key, version, correlation_id = _P_HHI.unpack_from(buf, 0)
    if api_key != ApiKey.PRODUCE or version not in PRODUCE_FAST_VERSIONS:
        raise FastPathFallback
    n = _P_H.unpack_from(buf, 8)[0]
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if pos + n > end:
            raise FastPathFallback
        client_id = str(buf[pos : pos + n], "utf-8")
        pos += n
    elif n != -1:
        raise FastPathFallback
    flexible = version >= 9
    if flexible:
        if buf[pos] != 0:
            raise FastPathFallback
        n, pos = read_uvarint(buf, pos + 1)
        n -= 1
    else:
        n = _P_H.unpack_from(buf, pos)[0]
        pos += 2
    transactional_id: str | None = None
    if n >= 0:
        if pos + n > end:
            raise FastPathFallback
        transactional_id = str(buf[pos : pos + n], "utf-8")
        pos += n
    elif n != -1:
        raise FastPathFallback
    acks, timeout_ms = _P_HI.unpack_from(buf, pos)
    topics, pos = _decode_topic_data(buf, pos + 6, flexible)
    if flexible:
        if buf[pos] != 0:
            raise FastPathFallback
        pos += 1
    if pos > end:
        raise FastPathFallback
    header = RequestHeader(api_key, version, correlation_id, client_id)
    request = ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topics
    )
    return header, request


def _decode_topic_data(
    buf: bytes | bytearray, pos: int, flexible: bool
) -> tuple[list[ProduceRequest_TopicProduceData], int]:
    """`topic_data` and the position after it: each topic's name and its partitions' batches,
    kept as views of the frame so the log validates and patches them where they arrived."""
    end = len(buf)
    view = memoryview(buf)
    topics = []
    count, pos = read_count(buf, pos, flexible)
    for _ in range(count):
        if flexible:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = _P_H.unpack_from(buf, pos)[0]
            pos += 2
        if n < 0 or pos + n > end:
            raise FastPathFallback
        name = str(buf[pos : pos + n], "utf-8")
        partitions = []
        pcount, pos = read_count(buf, pos + n, flexible)
        for _ in range(pcount):
            index = _P_I.unpack_from(buf, pos)[0]
            pos += 4
            if flexible:
                n, pos = read_uvarint(buf, pos)
                n -= 1
            else:
                n = _P_I.unpack_from(buf, pos)[0]
                pos += 4
            records: memoryview | None = None
            if n >= 0:
                if pos + n > end:
                    raise FastPathFallback
                records = view[pos : pos + n]
                pos += n
            elif n != -1:
                raise FastPathFallback
            if flexible:
                if buf[pos] != 0:
                    raise FastPathFallback
                pos += 1
            partitions.append(ProduceRequest.PartitionProduceData(index=index, records=records))
        if flexible:
            if buf[pos] != 0:
                raise FastPathFallback
            pos += 1
        topics.append(ProduceRequest.TopicProduceData(name=name, partition_data=partitions))
    return topics, pos


def read_count(buf: bytes | bytearray, pos: int, flexible: bool) -> tuple[int, int]:
    """A non-null array's element count and the next position; at most one element per byte
    left (each element takes at least one), so a bogus count falls back at once."""
    if flexible:
        n = buf[pos]
        if n & 0x80:
            n, pos = read_uvarint(buf, pos)
        else:
            pos += 1
        n -= 1
    else:
        n = _P_I.unpack_from(buf, pos)[0]
        pos += 4
    if n < 0 or n > len(buf) - pos:
        raise FastPathFallback
    return n, pos


#: Per partition, by version: index, error_code, base_offset, log_append_time_ms (v2+),
#: log_start_offset (v5+).
_P_PART_V3 = struct.Struct(">ihqq")
_P_PART_V5 = struct.Struct(">ihqqq")


def encode_produce_response(version: int, correlation_id: int, msg: object) -> bytes | None:
    """`encode_response(PRODUCE, version, ...)` for the usual Produce v3-v11 answer, or None for
    the generic codec: record errors, a current leader, node endpoints or tagged fields, a
    value out of its type's range or a string too long (the generic codec's error)."""
    try:
        return _encode_produce(version, correlation_id, msg)
    except (FastPathFallback, struct.error, UnicodeEncodeError, AttributeError, TypeError):
        return None


def _encode_produce(version: int, correlation_id: int, msg: object) -> bytes:
    """The response header and Produce's top-level fields around `_encode_responses`."""
    if (
        type(msg) is not ProduceResponse
        or version not in PRODUCE_FAST_VERSIONS
        or msg.unknown_tagged_fields
        or msg.node_endpoints
    ):
        raise FastPathFallback
    flexible = version >= 9
    out = [_P_I.pack(correlation_id)]
    if flexible:
        out.append(b"\x00")
    _encode_responses(out, msg.responses, version, flexible)
    out.append(_P_I.pack(msg.throttle_time_ms))
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


def _encode_responses(
    out: list[bytes],
    responses: list[ProduceResponse_TopicProduceResponse],
    version: int,
    flexible: bool,
) -> None:
    """`responses` appended to `out`: per topic its name and its partitions' results, each a
    fixed-size struct followed (v8+) by empty record errors and the error message."""
    part_struct = _P_PART_V5 if version >= 5 else _P_PART_V3
    with_errors = version >= 8
    no_record_errors = b"\x01" if flexible else b"\x00\x00\x00\x00"
    out.append(_fast_len(len(responses), flexible))
    for topic in responses:
        if topic.unknown_tagged_fields:
            raise FastPathFallback
        out.append(_fast_string(topic.name, flexible))
        out.append(_fast_len(len(topic.partition_responses), flexible))
        for part in topic.partition_responses:
            leader = part.current_leader
            if (
                part.record_errors
                or part.unknown_tagged_fields
                or leader.leader_id != -1
                or leader.leader_epoch != -1
                or leader.unknown_tagged_fields
            ):
                raise FastPathFallback
            if version >= 5:
                out.append(
                    part_struct.pack(
                        part.index,
                        part.error_code,
                        part.base_offset,
                        part.log_append_time_ms,
                        part.log_start_offset,
                    )
                )
            else:
                out.append(
                    part_struct.pack(
                        part.index, part.error_code, part.base_offset, part.log_append_time_ms
                    )
                )
            if with_errors:
                out.append(no_record_errors)
                message = part.error_message
                if message is None:
                    out.append(b"\x00" if flexible else b"\xff\xff")
                else:
                    out.append(_fast_string(message, flexible))
            if flexible:
                out.append(b"\x00")
        if flexible:
            out.append(b"\x00")


def _fast_len(n: int, flexible: bool) -> bytes:
    return uvarint_bytes(n + 1) if flexible else _P_I.pack(n)


def _fast_string(value: str, flexible: bool) -> bytes:
    """A non-null (compact) string; a non-str or one too long for int16 falls back."""
    if type(value) is not str:
        raise FastPathFallback
    data = value.encode("utf-8")
    if flexible:
        return uvarint_bytes(len(data) + 1) + data
    if len(data) > 0x7FFF:
        raise FastPathFallback
    return _P_H.pack(len(data)) + data
