"""Wire details real clients trip on (issue 2, "Wire details"), checked at the byte level."""

from __future__ import annotations

import struct

from kafkapy.protocol import RequestHeader, decode_request, encode_request, encode_response
from kafkapy.protocol.codec import decode_body, encode_body
from kafkapy.protocol.messages import FetchResponse, ProduceRequest, SyncGroupResponse


def test_empty_record_set_is_present_not_null() -> None:
    part = FetchResponse.PartitionData(partition_index=0)
    assert part.records == b""
    v4 = encode_body(1, 4, False, FetchResponse(responses=[
        FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])
    ]))
    assert v4.endswith(struct.pack(">i", 0))  # records length 0, not -1
    v12 = encode_body(1, 12, False, FetchResponse(responses=[
        FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])
    ]))
    assert v12.endswith(b"\x01\x00\x00\x00")  # compact length 0 (+1), then three empty tag sections
    part.records = None  # explicit null stays expressible
    assert encode_body(1, 4, False, FetchResponse(responses=[
        FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])
    ])).endswith(b"\xff\xff\xff\xff")


def test_empty_group_assignment_is_a_valid_empty_assignment() -> None:
    for version, tail in ((0, struct.pack(">i", 0)), (4, b"\x01\x00")):
        wire = encode_response(14, version, 9, SyncGroupResponse(error_code=0))
        assert wire.endswith(tail)
        assert decode_body(14, version, False, wire[4 + (version >= 4):]).assignment == b""


def test_produce_records_are_not_copied() -> None:
    batch = bytes(range(200)) * 300
    req = ProduceRequest(acks=1, timeout_ms=10, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=i, records=batch) for i in range(4)
        ])
    ])
    for version in (3, 9, 11):
        frame = encode_request(RequestHeader(0, version, 1, "c"), req)
        _, msg = decode_request(frame)
        for part in msg.topic_data[0].partition_data:
            records = part.records
            assert isinstance(records, memoryview)
            assert records.obj is frame  # a view of the frame itself: zero copies
            assert records == batch
