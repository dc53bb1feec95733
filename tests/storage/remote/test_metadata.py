"""`__remote_log_metadata` records: Kafka's bytes, round trips, and garbage refused cleanly."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.protocol.errors import ProtocolError
from kafkapy.storage.remote.layout import RemoteLogSegmentId, TopicIdPartition
from kafkapy.storage.remote.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    decode_remote_log_metadata,
    encode_remote_log_metadata,
    metadata_partition,
    murmur2,
)

TOPIC_ID = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)
SEGMENT = uuid.UUID(int=0xA0A1A2A3A4A5A6A7A8A9AAABACADAEAF)
TP = TopicIdPartition("orders", TOPIC_ID, 3)

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
tps = st.builds(TopicIdPartition, st.text(max_size=20), uuids, int32)
segment_ids = st.builds(RemoteLogSegmentId, tps, uuids)
records: st.SearchStrategy[RemoteLogMetadata] = st.one_of(
    st.builds(
        RemoteLogSegmentMetadata, segment_ids, int64, int64, int32, int64, int64,
        st.lists(st.tuples(int32, int64), max_size=4).map(tuple), int32,
        st.sampled_from(RemoteLogSegmentState), st.none() | st.binary(max_size=8), st.booleans(),
        int32),
    st.builds(
        RemoteLogSegmentMetadataUpdate, segment_ids, int32, int64,
        st.sampled_from(RemoteLogSegmentState), st.none() | st.binary(max_size=8), int32, int64),
    st.builds(
        RemotePartitionDeleteMetadata, tps, int32, int64,
        st.sampled_from(RemotePartitionDeleteState), int32, int64),
)


@given(records)
def test_every_record_round_trips(record: RemoteLogMetadata) -> None:
    assert decode_remote_log_metadata(encode_remote_log_metadata(record)) == record


@given(st.binary(max_size=200))
def test_garbage_raises_protocol_error_only(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_remote_log_metadata(data)


@given(records, st.data())
def test_truncated_records_are_refused(record: RemoteLogMetadata, data: st.DataObject) -> None:
    encoded = encode_remote_log_metadata(record)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(ProtocolError):
        decode_remote_log_metadata(encoded[:cut])


def _tp_bytes() -> bytes:
    # compact string "orders", topic id, partition int32, empty tagged fields
    return b"\x07orders" + TOPIC_ID.bytes + struct.pack(">i", 3) + b"\x00"


def test_update_record_has_kafkas_layout() -> None:
    """Written out from the RemoteLogSegmentMetadataUpdateRecord schema (v1) by hand."""
    update = RemoteLogSegmentMetadataUpdate(
        RemoteLogSegmentId(TP, SEGMENT), broker_id=7, event_timestamp_ms=1000,
        state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED, broker_leader_epoch=5, end_offset=99)
    expected = (
        b"\x01\x01"  # api key 1, version 1 (unsigned varints)
        + _tp_bytes() + SEGMENT.bytes + b"\x00"  # RemoteLogSegmentIdEntry + its tag section
        + struct.pack(">iq", 7, 1000)
        + b"\x00"  # CustomMetadata: null compact bytes
        + b"\x01"  # RemoteLogSegmentState
        + b"\x02" + b"\x00\x04" + struct.pack(">i", 5) + b"\x01\x08" + struct.pack(">q", 99))
    assert encode_remote_log_metadata(update) == expected


def test_segment_record_has_kafkas_layout() -> None:
    record = RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TP, SEGMENT), start_offset=10, end_offset=19, broker_id=1,
        max_timestamp_ms=55, event_timestamp_ms=66, segment_leader_epochs=((2, 10),),
        segment_size_in_bytes=4096, txn_index_empty=True)
    expected = (
        b"\x00\x01" + _tp_bytes() + SEGMENT.bytes + b"\x00"
        + struct.pack(">qqiqq", 10, 19, 1, 55, 66)
        + b"\x02" + struct.pack(">iq", 2, 10) + b"\x00"  # one SegmentLeaderEpochEntry
        + struct.pack(">i", 4096) + b"\x00" + b"\x00"  # size, null custom metadata, STARTED
        + b"\x01" + b"\x00\x01\x01")  # tag 0 (TxnIndexEmpty) = true; epoch 0 is the default
    assert encode_remote_log_metadata(record) == expected


def test_unknown_state_and_api_key_are_refused() -> None:
    record = RemotePartitionDeleteMetadata(TP, 1, 2, RemotePartitionDeleteState.DELETE_PARTITION_MARKED)
    encoded = bytearray(encode_remote_log_metadata(record))
    state_at = len(encoded) - 2  # state int8, then an empty tag section
    encoded[state_at] = 9
    with pytest.raises(ProtocolError, match="RemotePartitionDeleteState"):
        decode_remote_log_metadata(bytes(encoded))
    with pytest.raises(ProtocolError, match="api key 5"):
        decode_remote_log_metadata(b"\x05\x01")


@pytest.mark.parametrize(("data", "expected"), [
    (b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
    (b"abc", 479470107),
])
def test_murmur2_matches_kafkas_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(data: bytes) -> None:
    from kafka.partitioner.default import murmur2 as reference  # type: ignore[import-untyped]

    assert murmur2(data) & 0xFFFFFFFF == reference(data)


@given(tps, st.integers(1, 100))
def test_metadata_partition_is_stable_and_in_range(tp: TopicIdPartition, partitions: int) -> None:
    assert 0 <= metadata_partition(tp, partitions) < partitions
    renamed = TopicIdPartition("other-name", tp.topic_id, tp.partition)
    assert metadata_partition(renamed, partitions) == metadata_partition(tp, partitions)
