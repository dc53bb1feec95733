"""Heartbeat fast path (`kafkapy.protocol.heartbeat_fast`) against the generic codec.

What users rely on: a Heartbeat request decodes, and its answer encodes, to exactly what the
generic codec makes of it, for every version; malformed input still ends in ProtocolError.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import (
    ApiKey,
    RequestHeader,
    codec,
    decode_request,
    encode_request,
    encode_response,
    heartbeat_fast,
)
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.messages import HeartbeatRequest, HeartbeatResponse


@contextmanager
def _generic_only() -> Iterator[None]:
    codec.FAST_PATHS = False
    try:
        yield
    finally:
        codec.FAST_PATHS = True


def _generic(frame: bytes | bytearray) -> tuple[RequestHeader, object] | ProtocolError:
    with _generic_only():
        try:
            return decode_request(frame)
        except ProtocolError as e:
            return e


_text = st.text(st.characters(codec="utf-8"), max_size=140)
_request = st.builds(
    HeartbeatRequest,
    group_id=_text,
    generation_id=st.integers(-(2**31), 2**31 - 1),
    member_id=_text,
    group_instance_id=st.one_of(st.none(), _text),
)


def _frame(version: int, req: HeartbeatRequest, client_id: str | None) -> bytes:
    return encode_request(RequestHeader(ApiKey.HEARTBEAT, version, 7, client_id), req)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(0, 4), req=_request, client_id=st.one_of(st.none(), _text),
       as_bytearray=st.booleans())
def test_valid_requests_decode_as_the_generic_codec(
    version: int, req: HeartbeatRequest, client_id: str | None, as_bytearray: bool
) -> None:
    raw = _frame(version, req, client_id)
    frame = bytearray(raw) if as_bytearray else raw
    fast = heartbeat_fast.decode_heartbeat_request(frame)
    assert fast is not None
    assert fast == _generic(frame)
    assert decode_request(frame) == fast


@settings(max_examples=500, deadline=None)
@given(
    version=st.integers(0, 5),
    req=_request,
    mangle=st.sampled_from(["cut", "flip", "junk", "tag"]),
    where=st.integers(0, 10_000),
    junk=st.binary(min_size=1, max_size=8),
)
def test_malformed_requests_answer_as_the_generic_codec(
    version: int, req: HeartbeatRequest, mangle: str, where: int, junk: bytes
) -> None:
    with _generic_only():
        try:
            raw = bytearray(_frame(version, req, "c"))
        except ProtocolError:
            raw = bytearray(_frame(4, req, "c"))
    at = where % len(raw)
    if mangle == "cut":
        del raw[at:]
    elif mangle == "flip":
        raw[at] ^= junk[0]
    elif mangle == "junk":
        raw[at:at] = junk
    else:
        raw[at] = junk[0]
    frame = bytes(raw)
    expected = _generic(frame)
    fast = heartbeat_fast.decode_heartbeat_request(frame)
    if isinstance(expected, ProtocolError):
        assert fast is None
    elif fast is not None:
        assert fast == expected
    try:
        got: object = decode_request(frame)
    except ProtocolError as e:
        got = e
    if isinstance(expected, ProtocolError):
        assert type(got) is type(expected)
    else:
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 4),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    throttle=st.integers(-(2**32), 2**32),
    error_code=st.integers(-(2**16), 2**16),
    tags=st.one_of(st.just({}), st.dictionaries(st.integers(0, 50), st.binary(max_size=4), max_size=2)),
)
def test_answers_encode_as_the_generic_codec(
    version: int, correlation_id: int, throttle: int, error_code: int, tags: dict[int, bytes]
) -> None:
    resp = HeartbeatResponse(throttle_time_ms=throttle, error_code=error_code, unknown_tagged_fields=tags)
    with _generic_only():
        try:
            expected: bytes | type[ProtocolError] = encode_response(ApiKey.HEARTBEAT, version, correlation_id, resp)
        except ProtocolError:
            expected = ProtocolError
    fast = heartbeat_fast.encode_heartbeat_response(version, correlation_id, resp)
    if fast is not None:
        assert fast == expected
    try:
        got: bytes | type[ProtocolError] = encode_response(ApiKey.HEARTBEAT, version, correlation_id, resp)
    except ProtocolError:
        got = ProtocolError
    assert got == expected
