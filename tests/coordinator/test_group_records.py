"""__consumer_offsets record layouts: round trips, garbage handling, Kafka's partitioning."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.group import (
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordError,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    offsets_partition_for,
)
from kafkapy.coordinator.group.records import java_string_hash

names = st.text(max_size=20)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)

offset_keys = st.builds(OffsetCommitKey, names, names, i32)
offset_values = st.builds(OffsetCommitValue, i64, i32, st.none() | names, i64, i64)
members = st.builds(
    MemberMetadataValue, names, st.none() | names, names, names, i32, i32,
    st.binary(max_size=30), st.binary(max_size=30),
)
group_values = st.builds(
    GroupMetadataValue, names, i32, st.none() | names, st.none() | names, i64,
    st.lists(members, max_size=4).map(tuple),
)


@given(offset_keys, st.none() | offset_values)
def test_offset_commit_round_trip(key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
    k = decode_key(encode_key(key))
    assert k == key
    assert decode_value(k, encode_value(value)) == value


@given(names, group_values)
def test_group_metadata_round_trip(group: str, value: GroupMetadataValue) -> None:
    k = decode_key(encode_key(GroupMetadataKey(group)))
    assert k == GroupMetadataKey(group)
    assert decode_value(k, encode_value(value)) == value


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_garbage_key_raises_only_group_record_error(data: bytes) -> None:
    with contextlib.suppress(GroupRecordError):
        decode_key(data)


@settings(max_examples=300)
@given(st.sampled_from([OffsetCommitKey("g", "t", 0), GroupMetadataKey("g")]), st.binary(max_size=120))
def test_garbage_value_raises_only_group_record_error(
    key: OffsetCommitKey | GroupMetadataKey, data: bytes
) -> None:
    with contextlib.suppress(GroupRecordError):
        decode_value(key, data)


@given(names, group_values, st.data())
def test_every_truncation_of_a_value_is_rejected(
    group: str, value: GroupMetadataValue, data: st.DataObject
) -> None:
    raw = encode_value(value)
    assert raw is not None
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(GroupRecordError):
        decode_value(GroupMetadataKey(group), raw[:cut])


def test_trailing_bytes_and_unknown_versions_are_rejected() -> None:
    raw = encode_key(GroupMetadataKey("g"))
    with pytest.raises(GroupRecordError):
        decode_key(raw + b"\x00")
    with pytest.raises(GroupRecordError):
        decode_key(b"\x00\x07" + raw[2:])
    value = encode_value(OffsetCommitValue(5))
    assert value is not None
    with pytest.raises(GroupRecordError):
        decode_value(OffsetCommitKey("g", "t", 0), b"\x00\x09" + value[2:])


def test_huge_member_count_does_not_allocate() -> None:
    raw = encode_value(GroupMetadataValue("consumer", 1, "range", "m", 0, ()))
    assert raw is not None
    with pytest.raises(GroupRecordError):
        decode_value(GroupMetadataKey("g"), raw[:-4] + b"\x7f\xff\xff\xff")


def test_java_string_hash_matches_java() -> None:
    # values of String.hashCode() computed by the JVM
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 1772899  # surrogate pair: two UTF-16 units


def test_partition_for_group_follows_kafka() -> None:
    # Utils.abs(Integer.MIN_VALUE) is 0 in Kafka, not a negative number
    assert offsets_partition_for("polygenelubricants", 50) == 0
    assert offsets_partition_for("hello", 50) == 99162322 % 50
    for g in ("a", "my-group", "console-consumer-1234"):
        assert 0 <= offsets_partition_for(g, 50) < 50
