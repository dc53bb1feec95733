"""MetadataImage replay rules: epochs, deltas, inconsistent records rejected without change."""

from __future__ import annotations

import dataclasses
import typing
import uuid

import pytest

from kafkapy.controller.image import (
    _APPLY_STEPS,
    MetadataApplyError,
    MetadataDelta,
    MetadataImage,
    acl_key,
)
from kafkapy.controller.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

TID = uuid.UUID(int=7)
ACL_ID = uuid.UUID(int=70)
ACL = AccessControlEntryRecord(ACL_ID, 2, "orders", 3, "User:alice", "*", 4, 3)


def test_every_metadata_record_type_has_an_apply_step() -> None:
    """`apply` dispatches by exact type: a record type missing from its table would be
    replayed as a no-op, silently leaving the image behind the controller."""
    assert set(_APPLY_STEPS) == set(typing.get_args(MetadataRecord))


def build(*records: MetadataRecord) -> MetadataImage:
    image = MetadataImage()
    for i, rec in enumerate(records):
        image.apply(rec, i)
    return image


def base() -> MetadataImage:
    return build(
        RegisterBrokerRecord(1, uuid.UUID(int=1), 0, (), None),
        TopicRecord("t", TID),
        PartitionRecord(0, TID, (1, 2), (1, 2), 1),
        ACL,
    )


def test_partition_change_epochs() -> None:
    image = base()
    image.apply(PartitionChangeRecord(0, TID, isr=(1,)), 3)
    p = image.topics["t"].partitions[0]
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1,), 1, 0, 1)
    image.apply(PartitionChangeRecord(0, TID, leader=-1), 4)
    p = image.topics["t"].partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (-1, 1, 2)
    image.apply(PartitionChangeRecord(0, TID, replicas=(2, 1)), 5)
    p = image.topics["t"].partitions[0]
    assert (p.replicas, p.leader_epoch, p.partition_epoch) == ((2, 1), 1, 3)
    assert image.offset == 5


def test_broker_state_records() -> None:
    image = base()
    image.apply(UnfenceBrokerRecord(1, 0), 3)
    assert not image.brokers[1].fenced
    assert image.is_active(1)
    image.apply(BrokerRegistrationChangeRecord(1, 0, in_controlled_shutdown=True), 4)
    assert not image.is_active(1)
    assert not image.brokers[1].fenced
    image.apply(FenceBrokerRecord(1, 0), 5)
    assert image.brokers[1].fenced
    image.apply(UnregisterBrokerRecord(1, 0), 6)
    assert 1 not in image.brokers


@pytest.mark.parametrize(
    "record",
    [
        FenceBrokerRecord(1, 9),
        UnfenceBrokerRecord(5, 0),
        UnregisterBrokerRecord(1, 3),
        TopicRecord("t", uuid.UUID(int=8)),
        TopicRecord("u", TID),
        PartitionRecord(0, uuid.UUID(int=9), (1,), (1,), 1),
        PartitionChangeRecord(3, TID, isr=(1,)),
        RemoveTopicRecord(uuid.UUID(int=9)),
        ConfigRecord(ConfigResourceType.TOPIC, "nope", "a", "b"),
        ConfigRecord(7, "x", "a", "b"),
        ProducerIdsRecord(1, 0, 0),
        dataclasses.replace(ACL, resource_name="other"),  # the id is taken
        dataclasses.replace(ACL, id=uuid.UUID(int=71)),  # the same binding again
        RemoveAccessControlEntryRecord(uuid.UUID(int=71)),
    ],
)
def test_inconsistent_records_raise_and_change_nothing(record: MetadataRecord) -> None:
    image = base()
    before = image.copy()
    with pytest.raises(MetadataApplyError):
        image.apply(record, 3)
    assert image == before


def test_copy_is_independent() -> None:
    image = base()
    copy = image.copy()
    copy.apply(PartitionChangeRecord(0, TID, isr=(1,)), 3)
    copy.apply(ConfigRecord(ConfigResourceType.TOPIC, "t", "retention.ms", "1"), 4)
    assert image.topics["t"].partitions[0].isr == (1, 2)
    assert image.topics["t"].configs == {}
    assert image.offset == 3


def test_delta_names_what_changed() -> None:
    image = base()
    delta = MetadataDelta()
    assert delta.is_empty()
    image.apply(PartitionChangeRecord(0, TID, isr=(1,)), 3, delta)
    image.apply(ConfigRecord(ConfigResourceType.BROKER, "", "min.insync.replicas", "2"), 4, delta)
    image.apply(NoOpRecord(), 5, delta)
    assert delta.changed_partitions == {"t": {0}}
    assert delta.changed_broker_configs == {""}
    assert not delta.changed_brokers
    image.apply(RemoveTopicRecord(TID), 6, delta)
    assert "t" not in delta.changed_topics
    assert delta.deleted_topics[TID].name == "t"
    image.apply(TopicRecord("t", uuid.UUID(int=99)), 7, delta)
    assert delta.changed_topics == {"t"}
    image.apply(ConfigRecord(ConfigResourceType.BROKER, "", "min.insync.replicas", None), 8)
    assert image.broker_configs == {}


def test_producer_ids_only_move_forward() -> None:
    image = base()
    image.apply(ProducerIdsRecord(1, 0, 1000), 3)
    assert image.next_producer_id == 1000
    with pytest.raises(MetadataApplyError):
        image.apply(ProducerIdsRecord(1, 0, 1000), 4)


def test_acls_are_kept_by_id_and_by_binding_and_removed_by_id() -> None:
    image = base()
    assert image.acls == {ACL_ID: ACL}
    delta = MetadataDelta()
    other = dataclasses.replace(ACL, id=uuid.UUID(int=71), operation=2)
    image.apply(other, 4, delta)
    assert delta.changed_acls == {other.id}
    assert not delta.is_empty()
    copy = image.copy()
    copy.apply(RemoveAccessControlEntryRecord(ACL_ID), 5)
    assert set(image.acls) == {ACL_ID, other.id}  # the copy is independent
    assert set(copy.acls) == {other.id}
    # the removed binding may come back under a new id
    copy.apply(dataclasses.replace(ACL, id=uuid.UUID(int=72)), 6)
    assert copy.acl_ids[acl_key(ACL)] == uuid.UUID(int=72)
