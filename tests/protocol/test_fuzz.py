"""Garbage in, `ProtocolError` out: the h11 invariant for every decoder.

Users rely on a broker that answers or closes on bad bytes and never crashes, hangs or
allocates what a hostile length prefix asks for. Each decoder gets truncated, mutated and
random frames; the only acceptable outcomes are a message or `ProtocolError`, and the compiled
and interpreted codecs must agree on which.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import (
    ProtocolError,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_response,
)
from kafkapy.protocol.codec import decode_body, encode_body
from kafkapy.protocol.messages import SCHEMAS

from .strategies import all_versions, message_def, message_strategy

CASES = [(key, request) for key in sorted(SCHEMAS) for request in (True, False)]
IDS = [f"{SCHEMAS[k].name}-{'req' if r else 'resp'}" for k, r in CASES]


def _outcome(api_key: int, version: int, request: bool, data: bytes, compiled: bool) -> object:
    try:
        return decode_body(api_key, version, request, data, compiled=compiled)
    except ProtocolError as e:
        return ("error", type(e))


def _agree(api_key: int, version: int, request: bool, data: bytes) -> object:
    compiled = _outcome(api_key, version, request, data, True)
    interpreted = _outcome(api_key, version, request, data, False)
    assert compiled == interpreted
    return compiled


@pytest.mark.parametrize(("api_key", "request_"), CASES, ids=IDS)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_truncation_is_rejected(api_key: int, request_: bool, data: st.DataObject) -> None:
    lo, hi = message_def(api_key, request_).valid
    version = data.draw(st.integers(lo, hi), label="version")
    wire = encode_body(api_key, version, request_, data.draw(message_strategy(api_key, version, request_)))
    for cut in range(len(wire)):
        assert _agree(api_key, version, request_, wire[:cut]) == ("error", ProtocolError)


@pytest.mark.parametrize(("api_key", "request_"), CASES, ids=IDS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_frames(api_key: int, request_: bool, data: st.DataObject) -> None:
    lo, hi = message_def(api_key, request_).valid
    version = data.draw(st.integers(lo, hi), label="version")
    wire = bytearray(
        encode_body(api_key, version, request_, data.draw(message_strategy(api_key, version, request_)))
    )
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        if not wire:
            break
        pos = data.draw(st.integers(0, len(wire) - 1), label="pos")
        wire[pos] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, wire[pos] ^ 0x01]))
    _agree(api_key, version, request_, bytes(wire))


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(all_versions()), junk=st.binary(max_size=64))
def test_random_bodies(case: tuple[int, int, bool], junk: bytes) -> None:
    _agree(*case, junk)


@settings(max_examples=150, deadline=None)
@given(frame=st.binary(max_size=80))
def test_random_request_frames(frame: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request_header(frame)
    with contextlib.suppress(ProtocolError):
        decode_request(frame)


@settings(max_examples=100, deadline=None)
@given(case=st.sampled_from(all_versions()), junk=st.binary(max_size=64))
def test_random_response_frames(case: tuple[int, int, bool], junk: bytes) -> None:
    api_key, version, _ = case
    with contextlib.suppress(ProtocolError):
        decode_response(api_key, version, junk)


@pytest.mark.parametrize(
    "prefix",
    [struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", -2), struct.pack(">i", 0x40000000)],
    ids=["2GiB", "negative", "1GiB"],
)
def test_huge_length_prefixes_fail_without_allocating(prefix: bytes) -> None:
    # Metadata v1 request: a nullable array of topics; Produce v3: transactional id then arrays.
    with pytest.raises(ProtocolError):
        decode_body(3, 1, True, prefix + b"\x00" * 8)
    with pytest.raises(ProtocolError):
        decode_body(0, 3, True, b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x00\x01" + prefix)
    # SaslAuthenticate v0 request: a bytes field.
    with pytest.raises(ProtocolError):
        decode_body(36, 0, True, prefix + b"abc")


def test_overlong_varint_rejected() -> None:
    # ApiVersions v3 request: compact string length as a 6-byte varint.
    body = b"\x80\x80\x80\x80\x80\x01" + b"x"
    for compiled in (True, False):
        with pytest.raises(ProtocolError, match="longer than 5 bytes"):
            decode_body(18, 3, True, body, compiled=compiled)


def test_unknown_api_and_version_are_unsupported() -> None:
    frame = struct.pack(">hhi", 9999, 0, 1) + b"\xff\xff"
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)
    assert decode_request_header(frame).api_key == 9999
    frame = struct.pack(">hhi", 3, 99, 1) + b"\xff\xff"
    with pytest.raises(UnsupportedVersionError):
        decode_request(frame)


def test_trailing_bytes() -> None:
    from kafkapy.protocol.messages import MetadataRequest

    # librdkafka 2.16's Metadata v12 request for all topics, as captured on 127.0.0.1: Kafka
    # ignores the 3 bytes after the body, so must we (unless asked to be strict).
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    header, msg = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (3, 12, "rdkafka")
    assert msg == MetadataRequest(topics=None, allow_auto_topic_creation=False)
    with pytest.raises(ProtocolError, match="3 unexpected bytes"):
        decode_request(frame, strict=True)
    with pytest.raises(ProtocolError, match="unexpected bytes"):
        decode_body(3, 12, True, frame[18:])


def test_encode_rejects_null_where_not_nullable() -> None:
    from kafkapy.protocol.messages import HeartbeatResponse, MetadataRequest

    with pytest.raises(ProtocolError, match="null"):
        encode_body(3, 0, True, MetadataRequest(topics=None))
    assert encode_body(3, 1, True, MetadataRequest(topics=None)) == b"\xff\xff\xff\xff"
    with pytest.raises(ProtocolError):
        encode_response(12, 0, 1, HeartbeatResponse(error_code=1 << 20))
