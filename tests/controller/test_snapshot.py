"""Metadata snapshots: image -> bytes -> image, and snapshot + log tail == replaying the log."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.controller.image import MetadataApplyError, MetadataImage
from kafkapy.controller.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from kafkapy.controller.snapshot import SnapshotError, decode_snapshot, encode_snapshot

# Small pools, so that random records mostly fit the image they are applied to (a record that
# names an unknown topic or broker is skipped, as the publisher does).
broker_ids = st.integers(0, 3)
epochs = st.integers(0, 3)
topic_ids = st.sampled_from([uuid.UUID(int=i) for i in range(1, 4)])
names = st.sampled_from(["a", "b", "c"])
acl_ids = st.sampled_from([uuid.UUID(int=i) for i in range(100, 104)])
replica_lists = st.lists(broker_ids, max_size=3).map(tuple)
endpoints = st.builds(
    Endpoint, st.just("PLAINTEXT"), st.just("localhost"), st.integers(1, 9), st.just(0)
)

records: st.SearchStrategy[MetadataRecord] = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        broker_ids,
        st.uuids(),
        epochs,
        st.lists(endpoints, max_size=2).map(tuple),
        st.none() | st.just("r1"),
        st.booleans(),
    ),
    st.builds(UnregisterBrokerRecord, broker_ids, epochs),
    st.builds(FenceBrokerRecord, broker_ids, epochs),
    st.builds(UnfenceBrokerRecord, broker_ids, epochs),
    st.builds(
        BrokerRegistrationChangeRecord,
        broker_ids,
        epochs,
        st.none() | st.booleans(),
        st.none() | st.booleans(),
    ),
    st.builds(TopicRecord, names, topic_ids),
    st.builds(
        PartitionRecord,
        st.integers(0, 2),
        topic_ids,
        replica_lists,
        replica_lists,
        st.integers(-1, 3),
        st.integers(0, 5),
        st.integers(0, 5),
        replica_lists,  # adding / removing replicas of a reassignment
        replica_lists,
    ),
    st.builds(
        PartitionChangeRecord,
        st.integers(0, 2),
        topic_ids,
        st.none() | replica_lists,
        st.none() | st.integers(-1, 3),
        st.none() | replica_lists,
        st.none() | replica_lists,
        st.none() | replica_lists,
    ),
    st.builds(RemoveTopicRecord, topic_ids),
    st.builds(
        ConfigRecord,
        st.sampled_from(
            [ConfigResourceType.TOPIC, ConfigResourceType.BROKER, ConfigResourceType.GROUP]
        ),
        st.sampled_from(["a", "b", "", "1"]),
        st.sampled_from(["x", "y"]),
        st.none() | st.sampled_from(["1", "2"]),
    ),
    st.builds(ProducerIdsRecord, broker_ids, epochs, st.integers(0, 5000)),
    st.builds(
        UserScramCredentialRecord,
        names,
        st.integers(0, 3),  # 0 and 3 are no mechanism: skipped, as the publisher does
        st.binary(max_size=4),
        st.binary(max_size=4),
        st.binary(max_size=4),
        st.integers(4096, 16384),
    ),
    st.builds(RemoveUserScramCredentialRecord, names, st.integers(0, 3)),
    st.builds(
        AccessControlEntryRecord,
        acl_ids,
        st.sampled_from([2, 3, 4]),
        names,
        st.sampled_from([3, 4]),
        st.sampled_from(["User:a", "User:*"]),
        st.just("*"),
        st.sampled_from([2, 4]),
        st.sampled_from([2, 3]),
    ),
    st.builds(RemoveAccessControlEntryRecord, acl_ids),
    st.builds(FeatureLevelRecord, st.sampled_from(["metadata.version", "group.version"]), st.integers(-1, 30)),
    st.just(NoOpRecord()),
)


def replay(image: MetadataImage, recs: list[MetadataRecord], first_offset: int) -> MetadataImage:
    for i, record in enumerate(recs):
        try:
            image.apply(record, first_offset + i)
        except MetadataApplyError:
            image.offset = first_offset + i  # skipped, as the publisher skips it
    return image


@settings(max_examples=200, deadline=None)
@given(st.lists(records, max_size=60), st.data())
def test_snapshot_plus_tail_equals_replaying_the_whole_log(
    log: list[MetadataRecord], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(log)))
    epoch = data.draw(st.integers(0, 7))
    full = replay(MetadataImage(), log, 0)
    prefix = replay(MetadataImage(), log[:cut], 0)
    raw = encode_snapshot(prefix, end_offset=cut, epoch=epoch, timestamp_ms=123)
    header, loaded = decode_snapshot(raw)
    assert (header.end_offset, header.epoch, header.timestamp_ms) == (cut, epoch, 123)
    assert loaded == prefix
    assert replay(loaded, log[cut:], cut) == full


def test_a_big_image_spans_several_batches_and_round_trips() -> None:
    image = MetadataImage()
    for i in range(1200):
        tid = uuid.UUID(int=i + 1)
        image.apply(TopicRecord(f"t{i}", tid), 2 * i)
        image.apply(PartitionRecord(0, tid, (1, 2), (1,), 1, 4, 7), 2 * i + 1)
    raw = encode_snapshot(image, end_offset=2400, epoch=3, timestamp_ms=0)
    header, loaded = decode_snapshot(raw)
    assert header.end_offset == 2400
    assert loaded == image
    assert loaded.partition("t7", 0) is not None
    assert loaded.partition("t7", 0).leader_epoch == 4


def test_empty_image_round_trips() -> None:
    header, loaded = decode_snapshot(
        encode_snapshot(MetadataImage(), end_offset=1, epoch=1, timestamp_ms=0)
    )
    assert header.end_offset == 1
    assert loaded == MetadataImage(offset=0)


@given(st.data())
def test_cut_or_flipped_snapshots_are_rejected(data: st.DataObject) -> None:
    image = replay(
        MetadataImage(),
        [TopicRecord("a", uuid.UUID(int=1)), PartitionRecord(0, uuid.UUID(int=1), (1,), (1,), 1)],
        0,
    )
    raw = bytearray(encode_snapshot(image, end_offset=2, epoch=1, timestamp_ms=0))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(SnapshotError):
        decode_snapshot(raw)
