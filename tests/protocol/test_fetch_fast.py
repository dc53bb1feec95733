"""Fetch fast path (`kafkapy.protocol.fetch_fast`) against the generic codec.

What users rely on: a Fetch request decodes to exactly what the generic codec makes of it -
same header, same fields - and malformed input still ends in ProtocolError (the fast path gives
up, never answers differently). Both are checked on valid requests of every version it reads
and on those requests cut, bit-flipped or padded.
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
    encode_request,
    fetch_fast,
)
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.messages import FetchRequest


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


_text = st.text(st.characters(codec="utf-8"), max_size=40)
_int8 = st.integers(-(2**7), 2**7 - 1)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_partition = st.builds(
    FetchRequest.FetchPartition,
    partition=_int32,
    current_leader_epoch=_int32,
    fetch_offset=_int64,
    last_fetched_epoch=_int32,
    log_start_offset=_int64,
    partition_max_bytes=_int32,
)
_topic = st.builds(FetchRequest.FetchTopic, topic=_text, partitions=st.lists(_partition, max_size=4))
_forgotten = st.builds(FetchRequest.ForgottenTopic, topic=_text, partitions=st.lists(_int32, max_size=4))
_request = st.builds(
    FetchRequest,
    replica_id=_int32,
    max_wait_ms=_int32,
    min_bytes=_int32,
    max_bytes=_int32,
    isolation_level=_int8,
    session_id=_int32,
    session_epoch=_int32,
    topics=st.lists(_topic, max_size=3),
    forgotten_topics_data=st.lists(_forgotten, max_size=2),
    rack_id=_text,
)


def _frame(version: int, req: FetchRequest, client_id: str | None) -> bytes:
    return encode_request(RequestHeader(ApiKey.FETCH, version, 7, client_id), req)


def _as_written(version: int, req: FetchRequest) -> FetchRequest:
    """`req` as a peer of `version` can send it: the fields it has, the rest at their defaults."""
    with _generic_only():
        decoded = decode_request(_frame(version, req, None))[1]
    assert isinstance(decoded, FetchRequest)
    return decoded


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(4, 12),
    req=_request,
    client_id=st.one_of(st.none(), _text),
    as_bytearray=st.booleans(),
)
def test_valid_requests_decode_as_the_generic_codec(
    version: int, req: FetchRequest, client_id: str | None, as_bytearray: bool
) -> None:
    raw = _frame(version, req, client_id)
    frame = bytearray(raw) if as_bytearray else raw
    fast = fetch_fast.decode_fetch_request(frame)
    assert fast is not None  # a well-formed request of v4-v12 takes the fast path
    assert fast == _generic(frame)
    assert fast[1] == _as_written(version, req)
    assert decode_request(frame) == fast


@settings(max_examples=500, deadline=None)
@given(
    version=st.integers(0, 13),
    req=_request,
    mangle=st.sampled_from(["cut", "flip", "junk", "tag"]),
    where=st.integers(0, 10_000),
    junk=st.binary(min_size=1, max_size=8),
    as_bytearray=st.booleans(),
)
def test_malformed_requests_answer_as_the_generic_codec(
    version: int, req: FetchRequest, mangle: str, where: int, junk: bytes, as_bytearray: bool
) -> None:
    raw = bytearray(_frame(version, req, "c"))
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
    fast = fetch_fast.decode_fetch_request(frame)
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


@pytest.mark.parametrize(
    "req",
    [
        FetchRequest(cluster_id="c1"),
        FetchRequest(unknown_tagged_fields={7: b"xy"}),
        FetchRequest(topics=[FetchRequest.FetchTopic(topic="t", unknown_tagged_fields={5: b"z"})]),
        FetchRequest(topics=[FetchRequest.FetchTopic(topic="t", partitions=[
            FetchRequest.FetchPartition(unknown_tagged_fields={3: b"q"})])]),
    ],
)
def test_tagged_fields_take_the_generic_path(req: FetchRequest) -> None:
    """A tagged field the fast path does not read must not be dropped: the generic codec keeps
    it (cluster_id, `unknown_tagged_fields`)."""
    frame = _frame(12, req, "c")
    assert fetch_fast.decode_fetch_request(frame) is None
    assert decode_request(frame)[1] == req


@pytest.mark.parametrize("version", [3, 13, 16])
def test_other_versions_take_the_generic_path(version: int) -> None:
    frame = _frame(version, FetchRequest(max_wait_ms=5), "c")
    assert fetch_fast.decode_fetch_request(frame) is None
    assert decode_request(frame)[1] == _as_written(version, FetchRequest(max_wait_ms=5))


@pytest.mark.parametrize("version", [4, 11, 12])
def test_strict_decoding_still_refuses_trailing_bytes(version: int) -> None:
    frame = _frame(version, FetchRequest(max_wait_ms=5), "c") + b"\x00"
    assert decode_request(frame)[1] == _as_written(version, FetchRequest(max_wait_ms=5))
    with pytest.raises(ProtocolError):
        decode_request(frame, strict=True)
