"""Heartbeat fast path: Heartbeat v0-v4 requests read, and their fixed-shape answers written,
with `struct` at integer offsets beside the generic codec (`codec`), which dispatches here first.

Why: every consumer group member sends one every few seconds, so a broker with many clients
serves them as a steady stream of tiny requests; through the generic codec a heartbeat's three
fields cost more to read and write than the coordinator's work on it (perf/request_cost.py
--socket, heartbeat shape).

As `produce_fast`, it never decides anything on its own: anything it does not fully understand
(a truncation, a null where the schema forbids it, a tagged field, bad UTF-8, a value out of
range) makes it return None and the generic codec decodes, encodes or rejects it, so its answers
are the generic codec's (property test: tests/protocol/test_heartbeat_fast.py).
"""

from __future__ import annotations

import struct

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.headers import RequestHeader
from kafkapy.protocol.messages import HeartbeatRequest, HeartbeatResponse
from kafkapy.protocol.produce_fast import FastPathFallback, read_uvarint

__all__ = ["decode_heartbeat_request", "encode_heartbeat_response"]

_HEARTBEAT = int(ApiKey.HEARTBEAT)
_P_HHI = struct.Struct(">hhi")
_P_H = struct.Struct(">h")
_P_I = struct.Struct(">i")
#: response bodies by version: correlation id, [header tags], [throttle_time_ms v1+],
#: error_code, [tags v4+]
_P_RESPONSE = {
    0: struct.Struct(">ih"),
    1: struct.Struct(">iih"),
    2: struct.Struct(">iih"),
    3: struct.Struct(">iih"),
    4: struct.Struct(">ixihx"),
}


def decode_heartbeat_request(frame: bytes | bytearray) -> tuple[RequestHeader, HeartbeatRequest] | None:
    """`decode_request(frame)` for Heartbeat v0-v4, or None for the generic codec to handle."""
    try:
        return _decode_heartbeat(frame)
    except (FastPathFallback, struct.error, IndexError, UnicodeDecodeError):
        return None


def _decode_heartbeat(buf: bytes | bytearray) -> tuple[RequestHeader, HeartbeatRequest]:
    api_key, version, correlation_id = _P_HHI.unpack_from(buf, 0)
    if api_key != _HEARTBEAT or not 0 <= version <= 4:
        raise FastPathFallback
    flexible = version >= 4
    client_id, pos = _string(buf, 8, False, nullable=True)
    if flexible:
        if buf[pos] != 0:
            raise FastPathFallback
        pos += 1
    group_id, pos = _string(buf, pos, flexible)
    generation_id = _P_I.unpack_from(buf, pos)[0]
    member_id, pos = _string(buf, pos + 4, flexible)
    instance_id = None
    if version >= 3:
        instance_id, pos = _string(buf, pos, flexible, nullable=True)
    if flexible:
        if buf[pos] != 0:
            raise FastPathFallback
        pos += 1
    if pos > len(buf):
        raise FastPathFallback
    request = HeartbeatRequest(
        group_id=group_id or "", generation_id=generation_id, member_id=member_id or "",
        group_instance_id=instance_id,
    )
    return RequestHeader(api_key, version, correlation_id, client_id), request


def _string(buf: bytes | bytearray, pos: int, flexible: bool, *, nullable: bool = False) -> tuple[str | None, int]:
    """A (compact) string and the position after it; None for a null one where allowed."""
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
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise FastPathFallback
    if pos + n > len(buf):
        raise FastPathFallback
    return str(buf[pos : pos + n], "utf-8"), pos + n


def encode_heartbeat_response(version: int, correlation_id: int, msg: object) -> bytes | None:
    """`encode_response(HEARTBEAT, version, ...)` with one pack, or None for the generic codec
    (tagged fields, a value out of range, not a HeartbeatResponse)."""
    packer = _P_RESPONSE.get(version)
    if packer is None or type(msg) is not HeartbeatResponse or msg.unknown_tagged_fields:
        return None
    try:
        if version == 0:
            return packer.pack(correlation_id, msg.error_code)
        return packer.pack(correlation_id, msg.throttle_time_ms, msg.error_code)
    except struct.error:
        return None
