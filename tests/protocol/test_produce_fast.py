"""Produce fast path (`kafkapy.protocol.produce_fast`) against the generic codec.

What users rely on: a Produce request decodes to exactly what the generic codec makes of it -
same header, same fields, `records` a view of the caller's buffer - and malformed input still
ends in ProtocolError (the fast path gives up, never answers differently). Both are checked on
valid requests of every version it reads and on those requests cut, bit-flipped or padded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import (
    ApiKey,
    RequestHeader,
    codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    produce_fast,
)
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.messages import ProduceRequest, ProduceResponse


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
_records = st.one_of(st.none(), st.binary(max_size=300))
_partition = st.builds(
    ProduceRequest.PartitionProduceData, index=st.integers(-(2**31), 2**31 - 1), records=_records
)
_topic = st.builds(
    ProduceRequest.TopicProduceData,
    name=_text,
    partition_data=st.lists(_partition, max_size=4),
)
_request = st.builds(
    ProduceRequest,
    transactional_id=st.one_of(st.none(), _text),
    acks=st.sampled_from([-1, 0, 1, 2, -32768]),
    timeout_ms=st.integers(-(2**31), 2**31 - 1),
    topic_data=st.lists(_topic, max_size=3),
)


def _frame(version: int, req: ProduceRequest, client_id: str | None) -> bytes:
    return encode_request(RequestHeader(ApiKey.PRODUCE, version, 7, client_id), req)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 11),
    req=_request,
    client_id=st.one_of(st.none(), _text),
    as_bytearray=st.booleans(),
)
def test_valid_requests_decode_as_the_generic_codec(
    version: int, req: ProduceRequest, client_id: str | None, as_bytearray: bool
) -> None:
    raw = _frame(version, req, client_id)
    frame = bytearray(raw) if as_bytearray else raw
    fast = produce_fast.decode_produce_request(frame)
    assert fast is not None  # a well-formed request of v3-v11 takes the fast path
    assert fast == _generic(frame)
    assert fast[1] == req
    if as_bytearray:  # the log patches offsets into these views: they must be the frame itself
        for topic in fast[1].topic_data:
            for part in topic.partition_data:
                if part.records is not None:
                    assert isinstance(part.records, memoryview)
                    assert part.records.obj is frame


@settings(max_examples=500, deadline=None)
@given(
    version=st.integers(0, 12),
    req=_request,
    mangle=st.sampled_from(["cut", "flip", "junk", "tag"]),
    where=st.integers(0, 10_000),
    junk=st.binary(min_size=1, max_size=8),
    as_bytearray=st.booleans(),
)
def test_malformed_requests_answer_as_the_generic_codec(
    version: int, req: ProduceRequest, mangle: str, where: int, junk: bytes, as_bytearray: bool
) -> None:
    with _generic_only():  # versions the codec does not know still need a frame to mangle
        try:
            raw = bytearray(_frame(version, req, "c"))
        except ProtocolError:
            raw = bytearray(_frame(9, req, "c"))
    at = where % len(raw)
    if mangle == "cut":
        del raw[at:]
    elif mangle == "flip":
        raw[at] ^= junk[0]
    elif mangle == "junk":
        raw[at:at] = junk
    else:  # a byte where a tagged section (or a length) is expected
        raw[at] = junk[0]
    frame = raw if as_bytearray else bytes(raw)
    expected = _generic(frame)
    fast = produce_fast.decode_produce_request(frame)
    if isinstance(expected, ProtocolError):
        assert fast is None
    elif fast is not None:
        assert fast == expected
    # and through the public entry point: the generic answer, ProtocolError or a message
    try:
        got: object = decode_request(frame)
    except ProtocolError as e:
        got = e
    if isinstance(expected, ProtocolError):
        assert isinstance(got, ProtocolError)
        assert type(got) is type(expected)
    else:
        assert got == expected


def test_tagged_fields_take_the_generic_path() -> None:
    """A tagged field the fast path does not read must not be dropped: the generic codec keeps
    it in `unknown_tagged_fields`."""
    req = ProduceRequest(acks=1, timeout_ms=5, unknown_tagged_fields={7: b"xy"})
    frame = _frame(9, req, "c")
    assert produce_fast.decode_produce_request(frame) is None
    assert decode_request(frame)[1].unknown_tagged_fields == {7: b"xy"}


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_strict_decoding_still_refuses_trailing_bytes(version: int) -> None:
    frame = _frame(version, ProduceRequest(acks=1, timeout_ms=5), "c") + b"\x00"
    assert decode_request(frame)[1] == ProduceRequest(acks=1, timeout_ms=5)
    with pytest.raises(ProtocolError):
        decode_request(frame, strict=True)


def _generic_response(version: int, resp: ProduceResponse) -> bytes | ProtocolError:
    with _generic_only():
        try:
            return encode_response(ApiKey.PRODUCE, version, 7, resp)
        except ProtocolError as e:
            return e


_int16 = st.integers(-(2**15), 2**15 - 1)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_part_response = st.builds(
    ProduceResponse.PartitionProduceResponse,
    index=_int32,
    error_code=_int16,
    base_offset=_int64,
    log_append_time_ms=_int64,
    log_start_offset=_int64,
    error_message=st.one_of(st.none(), _text),
)
_response = st.builds(
    ProduceResponse,
    responses=st.lists(
        st.builds(
            ProduceResponse.TopicProduceResponse,
            name=_text,
            partition_responses=st.lists(_part_response, max_size=4),
        ),
        max_size=3,
    ),
    throttle_time_ms=_int32,
)
#: One departure from the usual answer per example, so that each is seen on its own.
_BREAKERS = [
    "none",
    "int16",
    "int32",
    "int64",
    "long_message",
    "record_errors",
    "leader",
    "partition_tags",
    "topic_tags",
    "tags",
    "endpoints",
    "throttle",
]


def _break(resp: ProduceResponse, breaker: str) -> None:
    parts = [p for t in resp.responses for p in t.partition_responses]
    part = parts[-1] if parts else None
    if breaker == "tags":
        resp.unknown_tagged_fields = {9: b"z"}
    elif breaker == "endpoints":
        resp.node_endpoints = [ProduceResponse.NodeEndpoint(node_id=1, host="h", port=9092)]
    elif breaker == "throttle":
        resp.throttle_time_ms = 2**31
    elif breaker == "topic_tags" and resp.responses:
        resp.responses[0].unknown_tagged_fields = {3: b""}
    elif part is None:
        return
    elif breaker == "int16":
        part.error_code = 2**15
    elif breaker == "int32":
        part.index = -(2**31) - 1
    elif breaker == "int64":
        part.log_start_offset = 2**63
    elif breaker == "long_message":
        part.error_message = "m" * 40_000
    elif breaker == "record_errors":
        part.record_errors = [ProduceResponse.BatchIndexAndErrorMessage(batch_index=1)]
    elif breaker == "leader":
        part.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=5)
    elif breaker == "partition_tags":
        part.unknown_tagged_fields = {1: b"x"}


@settings(max_examples=400, deadline=None)
@given(version=st.integers(0, 12), resp=_response, breaker=st.sampled_from(_BREAKERS))
def test_responses_encode_as_the_generic_codec(
    version: int, resp: ProduceResponse, breaker: str
) -> None:
    """Same bytes as the generic codec, or None (then the generic codec encodes or refuses);
    never an answer where the generic codec refuses (a value out of range, a long string)."""
    _break(resp, breaker)
    expected = _generic_response(version, resp)
    fast = produce_fast.encode_produce_response(version, 7, resp)
    if isinstance(expected, ProtocolError):
        assert fast is None
        with pytest.raises(ProtocolError):
            encode_response(ApiKey.PRODUCE, version, 7, resp)
        return
    if fast is not None:
        assert fast == expected
    assert encode_response(ApiKey.PRODUCE, version, 7, resp) == expected


@pytest.mark.parametrize("version", [3, 5, 8, 9, 11])
def test_the_usual_answer_takes_the_fast_path(version: int) -> None:
    resp = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="t",
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(
                        index=0, base_offset=42, log_start_offset=0 if version >= 5 else -1
                    ),
                    ProduceResponse.PartitionProduceResponse(index=1, error_code=3, base_offset=-1),
                ],
            )
        ]
    )
    fast = produce_fast.encode_produce_response(version, 7, resp)
    assert fast is not None
    assert fast == _generic_response(version, resp)
    assert decode_response(ApiKey.PRODUCE, version, fast) == (7, resp)
