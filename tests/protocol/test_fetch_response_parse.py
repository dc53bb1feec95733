"""The follower's slim Fetch answer parser (`protocol.fetch_response.parse_fetch_response`).

What the replica fetcher relies on: for every answer a leader can send (v13-17: errors,
aborted transactions, diverging epochs and other tagged fields, null / empty / large record
sets) it reads the same partition fields as the generic codec, with `records` the very bytes
sent; truncated or garbage input raises ProtocolError and nothing else (the fetcher backs off).
"""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey, decode_response, encode_response
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.fetch_response import (
    PartitionPart,
    TopicPart,
    encode_fetch_response,
    fetch_response_session_id,
    parse_fetch_response,
)
from kafkapy.protocol.messages import FetchResponse

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)

partitions = st.builds(
    FetchResponse.PartitionData,
    partition_index=st.integers(0, 2**31 - 1),
    error_code=st.integers(-1, 120),
    high_watermark=I64,
    last_stable_offset=I64,
    log_start_offset=I64,
    diverging_epoch=st.builds(FetchResponse.EpochEndOffset, epoch=I32, end_offset=I64),
    current_leader=st.builds(FetchResponse.LeaderIdAndEpoch, leader_id=I32, leader_epoch=I32),
    aborted_transactions=st.none() | st.lists(
        st.builds(FetchResponse.AbortedTransaction, producer_id=I64, first_offset=I64), max_size=3),
    preferred_read_replica=I32,
    records=st.none() | st.binary(max_size=300) | st.sampled_from([b"r" * 70_000]),
)
responses = st.builds(
    FetchResponse,
    throttle_time_ms=I32,
    error_code=st.integers(-1, 120),
    session_id=I32,
    responses=st.lists(
        st.builds(FetchResponse.FetchableTopicResponse, topic_id=st.uuids(),
                  partitions=st.lists(partitions, max_size=3)),
        max_size=3,
    ),
)


def _body(version: int, msg: FetchResponse) -> bytearray:
    frame = encode_response(ApiKey.FETCH, version, 1, msg)
    return bytearray(frame[5:])  # correlation id + empty header tags (flexible header v1)


@settings(max_examples=60, deadline=None)
@given(msg=responses, version=st.integers(13, 17))
def test_reads_what_the_generic_codec_reads(msg: FetchResponse, version: int) -> None:
    body = _body(version, msg)
    _, expected = decode_response(ApiKey.FETCH, version, encode_response(ApiKey.FETCH, version, 1, msg))
    error_code, topics = parse_fetch_response(version, body)
    assert error_code == expected.error_code
    assert fetch_response_session_id(body) == expected.session_id
    assert [t for t, _ in topics] == [t.topic_id for t in expected.responses]
    for (_, parts), want in zip(topics, expected.responses, strict=True):
        assert len(parts) == len(want.partitions)
        for got, w in zip(parts, want.partitions, strict=True):
            assert (got.partition_index, got.error_code, got.high_watermark, got.last_stable_offset,
                    got.log_start_offset) == (w.partition_index, w.error_code, w.high_watermark,
                                              w.last_stable_offset, w.log_start_offset)
            assert (None if got.records is None else bytes(got.records)) == (
                None if w.records is None else bytes(w.records))
            diverging = (w.diverging_epoch.epoch, w.diverging_epoch.end_offset)
            assert (got.diverging_epoch or (-1, -1)) == diverging


def test_reads_the_leaders_zero_copy_answer() -> None:
    """The leader's own encoder (what a follower really receives), diverging epoch included."""
    topic_id = uuid.uuid4()
    parts = [
        PartitionPart(0, high_watermark=9, last_stable_offset=9, log_start_offset=2, records=[b"abc", b"def"]),
        PartitionPart(1, error_code=6, high_watermark=-1, records=None),
        PartitionPart(2, high_watermark=5, log_start_offset=0, diverging_epoch=(3, 17)),
    ]
    raw = encode_fetch_response(15, [TopicPart("t", topic_id, parts)])
    body = b"".join(bytes(s) for s in raw.segments if isinstance(s, bytes | bytearray | memoryview))
    error_code, topics = parse_fetch_response(15, body)
    assert error_code == 0
    assert topics[0][0] == topic_id
    first, second, third = topics[0][1]
    assert (first.high_watermark, first.log_start_offset) == (9, 2)
    assert first.records is not None
    assert bytes(first.records) == b"abcdef"
    assert first.diverging_epoch is None
    assert (second.error_code, second.records) == (6, None)
    assert third.diverging_epoch == (3, 17)


@settings(max_examples=80, deadline=None)
@given(msg=responses, cut=st.integers(0, 2000), junk=st.binary(max_size=64))
def test_truncated_or_garbage_input_raises_protocol_error_only(msg: FetchResponse, cut: int, junk: bytes) -> None:
    body = _body(15, msg)
    with pytest.raises(ProtocolError):  # any proper prefix lacks bytes the parse must read
        parse_fetch_response(15, body[: min(cut, len(body) - 1)])
    with contextlib.suppress(ProtocolError):  # garbage: an answer or ProtocolError, nothing else
        parse_fetch_response(15, junk)


def test_versions_without_topic_ids_are_refused() -> None:
    with pytest.raises(ProtocolError):
        parse_fetch_response(12, b"\x00" * 16)
