"""The hand-built Fetch response (`protocol.fetch_response`) must decode with the generic codec,
for every version. File regions stand for slices of FILE_DATA here (sans-IO: nothing is read from
a file; the server's sendfile/pread of them is tests/server/test_zerocopy.py)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey, decode_response
from kafkapy.protocol.fetch_response import PartitionPart, TopicPart, encode_fetch_response
from kafkapy.protocol.primitives import uvarint_bytes
from kafkapy.protocol.raw_response import FileRegion, Segment

FILE_DATA = bytes(range(256)) * 64
DATA_FD = 1000  # the fd FILE_DATA stands behind


def _region_bytes(region: FileRegion) -> bytes:
    assert region.fd == DATA_FD
    return FILE_DATA[region.position : region.position + region.length]


def _materialize(version: int, parts: Sequence[Segment]) -> bytes:
    return b"".join(_region_bytes(s) if isinstance(s, FileRegion) else bytes(s) for s in parts)


regions = st.builds(
    lambda pos, length: FileRegion(DATA_FD, pos, length),
    st.integers(0, len(FILE_DATA) - 1), st.integers(0, 300),
).filter(lambda r: r.position + r.length <= len(FILE_DATA))

partitions = st.builds(
    PartitionPart,
    partition_index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 1, 3, 100]),
    high_watermark=st.integers(-1, 2**40),
    last_stable_offset=st.integers(-1, 2**40),
    log_start_offset=st.integers(-1, 2**40),
    aborted=st.none() | st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)), max_size=2),
    records=st.none() | st.lists(regions | st.binary(max_size=40), max_size=3),
    preferred_read_replica=st.integers(-1, 2**31 - 1),
)
topics = st.builds(
    TopicPart,
    name=st.text(alphabet="abc._-", min_size=1, max_size=10),
    topic_id=st.uuids(),
    partitions=st.lists(partitions, max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(version=st.integers(4, 17), topic_list=st.lists(topics, max_size=3), session_id=st.integers(0, 2**31 - 1), error=st.sampled_from([0, 70, 71]))
def test_hand_built_response_decodes_generically(version: int, topic_list: list[TopicPart], session_id: int, error: int) -> None:
    raw = encode_fetch_response(version, topic_list, error_code=error, session_id=session_id)
    body = _materialize(version, raw.segments)
    assert raw.size == len(body)
    header = struct.pack(">i", 42) + (b"\x00" if raw.flexible else b"")
    corr, msg = decode_response(ApiKey.FETCH, version, header + body)
    assert corr == 42
    if version >= 7:
        assert (msg.error_code, msg.session_id) == (error, session_id)
    assert len(msg.responses) == len(topic_list)
    for got_t, want_t in zip(msg.responses, topic_list, strict=True):
        if version >= 13:
            assert got_t.topic_id == want_t.topic_id
        else:
            assert got_t.topic == want_t.name
        for got, want in zip(got_t.partitions, want_t.partitions, strict=True):
            assert (got.partition_index, got.error_code, got.high_watermark) == (want.partition_index, want.error_code, want.high_watermark)
            if version >= 5:
                assert got.log_start_offset == want.log_start_offset
            assert got.last_stable_offset == want.last_stable_offset
            want_aborted = None if want.aborted is None else [list(a) for a in want.aborted]
            got_aborted = None if got.aborted_transactions is None else [[a.producer_id, a.first_offset] for a in got.aborted_transactions]
            assert got_aborted == want_aborted
            if version >= 11:
                assert got.preferred_read_replica == want.preferred_read_replica
            if want.records is None:
                assert got.records is None
            else:
                assert bytes(got.records or b"") == _materialize(version, list(want.records))


def test_uvarint_matches_known_encodings() -> None:
    assert uvarint_bytes(0) == b"\x00"
    assert uvarint_bytes(127) == b"\x7f"
    assert uvarint_bytes(128) == b"\x80\x01"
    assert uvarint_bytes(300) == b"\xac\x02"


def test_topic_id_layout_v13() -> None:
    tid = uuid.uuid4()
    raw = encode_fetch_response(13, [TopicPart("ignored", tid, [PartitionPart(0)])])
    _, msg = decode_response(ApiKey.FETCH, 13, struct.pack(">i", 1) + b"\x00" + _materialize(13, raw.segments))
    assert msg.responses[0].topic_id == tid
