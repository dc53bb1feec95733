"""Fetch fast path: Fetch v4-v12 requests (topic names, no tagged fields) read with `struct` at
integer offsets, beside the generic codec (`codec`), which dispatches here first.

Why: a consumer's long poll, a follower's replica fetch and every small fetch pay the request's
fixed cost; the generic codec reads Fetch v12's ~15 fields per partition and ~10 at the top
through Python stream calls, a fifth of a small fetch's broker CPU (perf/request_cost.py
--socket). Here the fixed part of the request and of each partition is one `unpack_from`.

As `produce_fast`, it never decides anything on its own: anything it does not fully understand -
a truncation, a null or negative length where the schema forbids it, a tagged field (cluster_id,
a partition's tags), a multi-byte count, bad UTF-8 - makes it return None and the generic codec
decodes (or rejects) the frame, so its answers are the generic codec's by construction (and by
property test, tests/protocol/test_fetch_fast.py). From v13 topics are named by id; those
versions take the generic path.
"""

from __future__ import annotations

import struct

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.headers import RequestHeader
from kafkapy.protocol.messages import FetchRequest
from kafkapy.protocol.messages.fetch import (
    FetchRequest_FetchPartition,
    FetchRequest_FetchTopic,
    FetchRequest_ForgottenTopic,
)
from kafkapy.protocol.produce_fast import FastPathFallback, read_count, read_uvarint

__all__ = ["FETCH_FAST_VERSIONS", "decode_fetch_request"]

#: Fetch versions the fast path reads: v4 (isolation level) to v12, the last with topic names.
FETCH_FAST_VERSIONS = range(4, 13)

_FETCH = int(ApiKey.FETCH)
_P_HHI = struct.Struct(">hhi")
_P_H = struct.Struct(">h")
_P_I = struct.Struct(">i")
#: replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level (+ session id and epoch, v7+)
_P_TOP_V4 = struct.Struct(">iiiib")
_P_TOP_V7 = struct.Struct(">iiiibii")
#: per partition: partition, [current_leader_epoch v9+], fetch_offset, [last_fetched_epoch
#: v12+], [log_start_offset v5+], partition_max_bytes
_P_PART_V4 = struct.Struct(">iqi")
_P_PART_V5 = struct.Struct(">iqqi")
_P_PART_V9 = struct.Struct(">iiqqi")
_P_PART_V12 = struct.Struct(">iiqiqi")
_Partition = FetchRequest_FetchPartition
_Topic = FetchRequest_FetchTopic


def decode_fetch_request(frame: bytes | bytearray) -> tuple[RequestHeader, FetchRequest] | None:
    """`decode_request(frame)` for Fetch v4-v12, or None for the generic codec to handle."""
    try:
        return _decode_fetch(frame)
    except (FastPathFallback, struct.error, IndexError, UnicodeDecodeError):
        return None


def _decode_fetch(buf: bytes | bytearray) -> tuple[RequestHeader, FetchRequest]:
    """The request header and Fetch's top-level fields around `_decode_topics`."""
    api_key, version, correlation_id = _P_HHI.unpack_from(buf, 0)
    if api_key != _FETCH or version not in FETCH_FAST_VERSIONS:
        raise FastPathFallback
    n = _P_H.unpack_from(buf, 8)[0]
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if pos + n > len(buf):
            raise FastPathFallback
        client_id = str(buf[pos : pos + n], "utf-8")
        pos += n
    elif n != -1:
        raise FastPathFallback
    flexible = version >= 12
    if flexible:
        if buf[pos] != 0:
            raise FastPathFallback
        pos += 1
    request = FetchRequest()
    if version >= 7:
        (
            request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes,
            request.isolation_level, request.session_id, request.session_epoch,
        ) = _P_TOP_V7.unpack_from(buf, pos)
        pos += _P_TOP_V7.size
    else:
        (
            request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes,
            request.isolation_level,
        ) = _P_TOP_V4.unpack_from(buf, pos)
        pos += _P_TOP_V4.size
    request.topics, pos = _decode_topics(buf, pos, version)
    if version >= 7:
        request.forgotten_topics_data, pos = _decode_forgotten(buf, pos, flexible)
    if version >= 11:
        request.rack_id, pos = _string(buf, pos, flexible)
    if flexible:
        if buf[pos] != 0:  # cluster_id or another tagged field: the generic codec keeps them
            raise FastPathFallback
        pos += 1
    if pos > len(buf):
        raise FastPathFallback
    return RequestHeader(api_key, version, correlation_id, client_id), request


def _decode_topics(buf: bytes | bytearray, pos: int, version: int) -> tuple[list[_Topic], int]:
    """`topics` and the position after it; each partition's fixed fields are one unpack."""
    flexible = version >= 12
    read = _PARTITION_READERS[version]
    topics = []
    count, pos = read_count(buf, pos, flexible)
    for _ in range(count):
        name, pos = _string(buf, pos, flexible)
        partitions = []
        pcount, pos = read_count(buf, pos, flexible)
        for _ in range(pcount):
            partition, pos = read(buf, pos)
            partitions.append(partition)
            if flexible:
                if buf[pos] != 0:
                    raise FastPathFallback
                pos += 1
        if flexible:
            if buf[pos] != 0:
                raise FastPathFallback
            pos += 1
        topics.append(_Topic(topic=name, partitions=partitions))
    return topics, pos


def _partition_v4(buf: bytes | bytearray, pos: int) -> tuple[_Partition, int]:
    partition, fetch_offset, max_bytes = _P_PART_V4.unpack_from(buf, pos)
    return _Partition(
        partition=partition, fetch_offset=fetch_offset, partition_max_bytes=max_bytes
    ), pos + 16


def _partition_v5(buf: bytes | bytearray, pos: int) -> tuple[_Partition, int]:
    partition, fetch_offset, log_start_offset, max_bytes = _P_PART_V5.unpack_from(buf, pos)
    return _Partition(
        partition=partition, fetch_offset=fetch_offset, log_start_offset=log_start_offset,
        partition_max_bytes=max_bytes,
    ), pos + 24


def _partition_v9(buf: bytes | bytearray, pos: int) -> tuple[_Partition, int]:
    partition, epoch, fetch_offset, log_start_offset, max_bytes = _P_PART_V9.unpack_from(buf, pos)
    return _Partition(
        partition=partition, current_leader_epoch=epoch, fetch_offset=fetch_offset,
        log_start_offset=log_start_offset, partition_max_bytes=max_bytes,
    ), pos + 28


def _partition_v12(buf: bytes | bytearray, pos: int) -> tuple[_Partition, int]:
    partition, epoch, fetch_offset, last_epoch, log_start_offset, max_bytes = _P_PART_V12.unpack_from(
        buf, pos
    )
    return _Partition(
        partition=partition, current_leader_epoch=epoch, fetch_offset=fetch_offset,
        last_fetched_epoch=last_epoch, log_start_offset=log_start_offset, partition_max_bytes=max_bytes,
    ), pos + 32


_PARTITION_READERS = {
    4: _partition_v4, 5: _partition_v5, 6: _partition_v5, 7: _partition_v5, 8: _partition_v5,
    9: _partition_v9, 10: _partition_v9, 11: _partition_v9, 12: _partition_v12,
}


def _decode_forgotten(
    buf: bytes | bytearray, pos: int, flexible: bool
) -> tuple[list[FetchRequest_ForgottenTopic], int]:
    """`forgotten_topics_data` (v7+): topic names and their partition indexes."""
    forgotten = []
    count, pos = read_count(buf, pos, flexible)
    for _ in range(count):
        name, pos = _string(buf, pos, flexible)
        n, pos = read_count(buf, pos, flexible)
        if 4 * n > len(buf) - pos:
            raise FastPathFallback
        indexes = list(struct.unpack_from(f">{n}i", buf, pos))
        pos += 4 * n
        if flexible:
            if buf[pos] != 0:
                raise FastPathFallback
            pos += 1
        forgotten.append(FetchRequest_ForgottenTopic(topic=name, partitions=indexes))
    return forgotten, pos


def _string(buf: bytes | bytearray, pos: int, flexible: bool) -> tuple[str, int]:
    """A non-null (compact) string and the position after it."""
    if flexible:
        n = buf[pos]
        if n & 0x80:
            n, pos = read_uvarint(buf, pos)
        else:
            pos += 1
        n -= 1
    else:
        n = _P_H.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0 or pos + n > len(buf):
        raise FastPathFallback
    return str(buf[pos : pos + n], "utf-8"), pos + n
