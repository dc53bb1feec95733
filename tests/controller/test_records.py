"""Metadata record encoding: every record type round-trips, garbage raises ProtocolError only."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.controller import records as records_module
from kafkapy.controller.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    Endpoint,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordType,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
)
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from tests.kafka_reference import kafka_reference

i8 = st.integers(-(2**7), 2**7 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.uuids()
text = st.text(max_size=12)
opt_bool = st.none() | st.booleans()
i32s = st.lists(i32, max_size=6).map(tuple)
endpoints = st.builds(Endpoint, text, text, st.integers(0, 65535), i32)

records: st.SearchStrategy[MetadataRecord] = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        i32,
        uuids,
        i64,
        st.lists(endpoints, max_size=3).map(tuple),
        st.none() | text,
        st.booleans(),
    ),
    st.builds(UnregisterBrokerRecord, i32, i64),
    st.builds(FenceBrokerRecord, i32, i64),
    st.builds(UnfenceBrokerRecord, i32, i64),
    st.builds(BrokerRegistrationChangeRecord, i32, i64, opt_bool, opt_bool),
    st.builds(TopicRecord, text, uuids),
    st.builds(PartitionRecord, i32, uuids, i32s, i32s, i32, i32, i32, i32s, i32s),
    st.builds(
        PartitionChangeRecord,
        i32,
        uuids,
        st.none() | i32s,
        st.none() | i32,
        st.none() | i32s,
        st.none() | i32s,
        st.none() | i32s,
    ),
    st.builds(RemoveTopicRecord, uuids),
    st.builds(ConfigRecord, i8, text, text, st.none() | text),
    st.builds(ProducerIdsRecord, i32, i64, i64),
    st.builds(
        UserScramCredentialRecord,
        text,
        i8,
        st.binary(max_size=8),
        st.binary(max_size=8),
        st.binary(max_size=8),
        i32,
    ),
    st.builds(RemoveUserScramCredentialRecord, text, i8),
    st.builds(AccessControlEntryRecord, uuids, i8, text, i8, text, text, i8, i8),
    st.builds(RemoveAccessControlEntryRecord, uuids),
    st.builds(
        ClientQuotaRecord,
        st.lists(st.tuples(text, st.none() | text), max_size=3).map(tuple),
        text,
        st.floats(allow_nan=False),
        st.booleans(),
    ),
    st.builds(FeatureLevelRecord, st.sampled_from(["metadata.version", "group.version"]), st.integers(-1, 30)),
    st.just(NoOpRecord()),
)


@given(records)
def test_every_record_round_trips(record: MetadataRecord) -> None:
    data = encode_record(record)
    assert decode_record(data) == record
    assert decode_record(memoryview(bytearray(data))) == record


@given(records, st.data())
def test_every_truncation_is_a_protocol_error(record: MetadataRecord, data: st.DataObject) -> None:
    raw = encode_record(record)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(ProtocolError) as info:
        decode_record(raw[:cut])
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


@given(records, st.binary(min_size=1, max_size=4))
def test_trailing_bytes_are_rejected(record: MetadataRecord, tail: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_record(encode_record(record) + tail)


@settings(max_examples=400)
@given(st.binary(max_size=64))
def test_garbage_decodes_or_raises_protocol_error(data: bytes) -> None:
    try:
        record = decode_record(data)
    except ProtocolError:
        return
    # Whatever parsed must be a record that encodes back to the same bytes' meaning.
    assert decode_record(encode_record(record)) == record


@given(records, st.data())
def test_flipped_bytes_never_crash(record: MetadataRecord, data: st.DataObject) -> None:
    raw = bytearray(encode_record(record))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(ProtocolError):
        decode_record(bytes(raw))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x01\x02\x00", "unknown frame version"),
        (b"\x00\x63\x00", "unknown record type"),
        (b"\x00\x14\x01", "unknown version"),
        (b"\x00\x02\x00\x00" + bytes(16), "null string"),
        (b"\x00\x02\x00\x7f", "exceeds"),
        (b"\x00" + b"\xff" * 11, "longer than ten bytes"),
    ],
)
def test_specific_garbage_names_the_problem(data: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode_record(data)


def test_out_of_range_int32_is_rejected() -> None:
    # A FenceBrokerRecord whose id is 2**31 (zigzag 2**32) does not fit an int32.
    raw = bytearray(b"\x00\x07\x00")
    value = 2**32
    while value >= 0x80:
        raw.append((value & 0x7F) | 0x80)
        value >>= 7
    raw += bytes([value, 0])
    with pytest.raises(ProtocolError, match="out of range"):
        decode_record(bytes(raw))


def test_port_out_of_range_is_rejected() -> None:
    rec = RegisterBrokerRecord(1, uuid.uuid4(), 5, (Endpoint("PLAINTEXT", "h", 70000),), None)
    with pytest.raises(ProtocolError, match="port"):
        decode_record(encode_record(rec))


def test_no_op_is_three_bytes_with_kafkas_type_id() -> None:
    assert encode_record(NoOpRecord()) == b"\x00\x14\x00"


def test_reassignment_fields_make_version_1_and_only_then() -> None:
    """Records without an ongoing reassignment keep their version 0 bytes, so metadata logs and
    snapshots written before reassignments existed read back unchanged."""
    tid = uuid.UUID(int=7)
    plain = encode_record(PartitionRecord(0, tid, (1, 2), (1, 2), 1))
    assert plain[2] == 0
    moving = PartitionRecord(0, tid, (3, 1, 2), (1, 2), 1, 0, 0, (3,), (2,))
    raw = encode_record(moving)
    assert raw[2] == 1
    assert raw.startswith(plain[:2])
    assert decode_record(raw) == moving
    change = PartitionChangeRecord(0, tid, adding_replicas=(), removing_replicas=())
    assert encode_record(change)[2] == 1
    assert encode_record(PartitionChangeRecord(0, tid, isr=(1,)))[2] == 0
    with pytest.raises(ProtocolError, match="unknown version"):
        decode_record(b"\x00\x02\x01" + encode_record(TopicRecord("t", tid))[3:])


@pytest.mark.parametrize(
    ("cls", "rtype"),
    [
        (UserScramCredentialRecord, RecordType.USER_SCRAM_CREDENTIAL),
        (RemoveUserScramCredentialRecord, RecordType.REMOVE_USER_SCRAM_CREDENTIAL),
        (AccessControlEntryRecord, RecordType.ACCESS_CONTROL_ENTRY),
        (RemoveAccessControlEntryRecord, RecordType.REMOVE_ACCESS_CONTROL_ENTRY),
        (FeatureLevelRecord, RecordType.FEATURE_LEVEL),
    ],
)
def test_records_match_kafkas_definitions(cls: type, rtype: RecordType) -> None:
    """Kafka's api key, and its fields' names (snake_case) and types in Kafka's order, are the
    ones the codec writes (the kinds carry Kafka's type names)."""
    path = kafka_reference("metadata", f"{cls.__name__}.json")
    lines = [line for line in path.read_text().splitlines() if not line.strip().startswith("//")]
    spec = json.loads("\n".join(lines))
    assert spec["apiKey"] == int(rtype)
    assert spec["validVersions"] == "0"
    theirs = [
        (re.sub(r"(?<!^)(?=[A-Z])", "_", f["name"]).lower(), f["type"]) for f in spec["fields"]
    ]
    schema_type, fields = records_module._SCHEMAS[cls]
    assert schema_type == rtype
    assert [(name, kind.value) for name, kind in fields] == theirs
    assert [f.name for f in dataclasses.fields(cls)] == [name for name, _ in theirs]


def test_a_credential_record_prints_no_keys() -> None:
    record = UserScramCredentialRecord("alice", 2, b"salt-bytes", b"stored-key", b"server-key", 4096)
    assert decode_record(encode_record(record)) == record
    shown = repr(record)
    assert "alice" in shown
    assert "salt-bytes" not in shown
    assert "stored-key" not in shown
    assert "server-key" not in shown


def test_acl_records_carry_kafkas_type_ids() -> None:
    """AccessControlEntryRecord / RemoveAccessControlEntryRecord are Kafka's metadata record
    types 18 / 19; the id (a UUID) comes first, as in Kafka's schema."""
    acl = AccessControlEntryRecord(uuid.UUID(int=5), 2, "orders", 4, "User:alice", "*", 4, 3)
    raw = encode_record(acl)
    assert raw[:3] == b"\x00\x12\x00"
    assert raw[3:19] == uuid.UUID(int=5).bytes
    assert encode_record(RemoveAccessControlEntryRecord(uuid.UUID(int=5)))[:3] == b"\x00\x13\x00"

