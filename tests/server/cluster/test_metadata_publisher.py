"""MetadataPublisher: a restarted broker's data plane sees no image before it has caught up.

What the cluster relies on: a broker that comes back replays its metadata from disk (the
newest snapshot, then the log as far as a Raft leader says it is committed). That image is a
state the cluster has left - this node may lead partitions (and so coordinate groups and
transactions) in epochs superseded while it was down. Acting on it raced the real leaders:
a chaos run saw a restarted node take `__consumer_offsets` leadership and a transaction
coordinator abort a transaction from a stale `__transaction_state` leadership. So the data plane
(`broker.apply_metadata`) gets no image until the controller has unfenced this process's own
registration (which it does once the node applied everything up to it); then it gets the whole
caught-up image at once, and every image after that as usual.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any, cast

from kafkapy.controller.image import MetadataDelta, MetadataImage
from kafkapy.controller.records import (
    Endpoint,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    encode_record,
)
from kafkapy.raft import Entry
from kafkapy.server.cluster.metadata_publisher import MetadataPublisher
from kafkapy.server.cluster.node import ClusterNode

TXN_TOPIC_ID = uuid.UUID(int=7)
OLD_INCARNATION = uuid.UUID(int=100)
NEW_INCARNATION = uuid.UUID(int=101)
ME = 2


class FakeRaft:
    def __init__(self) -> None:
        self.on_committed: Callable[[Sequence[Entry]], None] | None = None
        self.on_snapshot: Callable[[MetadataImage, int], None] | None = None

    def subscribe(self, on_committed: Any, on_snapshot: Any) -> None:
        self.on_committed = on_committed
        self.on_snapshot = on_snapshot


class RecordingBroker:
    def __init__(self) -> None:
        self.applied: list[tuple[MetadataImage, MetadataDelta | None]] = []

    def apply_metadata(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        self.applied.append((image, delta))


class FakeNode:
    """What ClusterNode wires around its publisher, with ClusterNode's own `has_joined` as the
    broker role's `may_publish`."""

    def __init__(self, broker: RecordingBroker, *, is_broker: bool = True) -> None:
        self.node_id = ME
        self.lifecycle = SimpleNamespace(incarnation_id=NEW_INCARNATION)
        self._joined = False
        self.raft = FakeRaft()
        self.publisher = MetadataPublisher(
            broker.apply_metadata, node_id=ME, may_publish=self.has_joined if is_broker else lambda: True
        )
        self.raft.subscribe(self.publisher.on_committed, self.publisher.on_snapshot)

    @property
    def image(self) -> MetadataImage:
        return self.publisher.image

    def has_joined(self) -> bool:
        return ClusterNode.has_joined(cast(ClusterNode, self))


def registration(broker_id: int, incarnation: uuid.UUID, epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id, incarnation, epoch, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),), None
    )


def entries(first_offset: int, records: list[MetadataRecord], epoch: int = 5) -> list[Entry]:
    return [Entry(first_offset + i, epoch, encode_record(r)) for i, r in enumerate(records)]


def stale_image() -> MetadataImage:
    """What the restarted node has on disk: it was leader of `__transaction_state-0` in
    leader epoch 3, and its old incarnation was unfenced."""
    image = MetadataImage()
    records: list[MetadataRecord] = [
        registration(1, uuid.UUID(int=1), 0),
        registration(ME, OLD_INCARNATION, 1),
        registration(3, uuid.UUID(int=3), 2),
        UnfenceBrokerRecord(1, 0),
        UnfenceBrokerRecord(ME, 1),
        UnfenceBrokerRecord(3, 2),
        TopicRecord("__transaction_state", TXN_TOPIC_ID),
        PartitionRecord(0, TXN_TOPIC_ID, (1, ME, 3), (1, ME, 3), 1, 0, 0),
        PartitionChangeRecord(0, TXN_TOPIC_ID, leader=ME),
        PartitionChangeRecord(0, TXN_TOPIC_ID, leader=1),
        PartitionChangeRecord(0, TXN_TOPIC_ID, leader=ME),
    ]
    for offset, record in enumerate(records):
        image.apply(record, offset)
    return image


def txn_leader(image: MetadataImage) -> tuple[int, int]:
    part = image.topics["__transaction_state"].partitions[0]
    return part.leader, part.leader_epoch


def test_a_restarted_broker_acts_on_no_image_before_it_caught_up_and_was_unfenced() -> None:
    broker = RecordingBroker()
    node = FakeNode(broker)
    publisher = node.publisher
    raft = node.raft
    assert raft.on_committed is not None
    assert raft.on_snapshot is not None

    # start-up: the snapshot on disk says this node leads __transaction_state-0 (epoch 3)
    snapshot = stale_image()
    assert txn_leader(snapshot) == (ME, 3)
    raft.on_snapshot(snapshot, 4)
    # the first part of the log fetched from the leader: still the old world
    raft.on_committed(entries(11, [PartitionChangeRecord(0, TXN_TOPIC_ID, isr=(ME, 3))]))
    assert node.image.offset == 11  # the image itself follows (heartbeats report its offset)
    assert broker.applied == [], "the data plane acted on an image from before the restart"

    # the rest: node 2 was fenced and lost the leadership, then this process registered
    raft.on_committed(
        entries(12, [
            PartitionChangeRecord(0, TXN_TOPIC_ID, leader=3, isr=(3,)),
            registration(ME, NEW_INCARNATION, 13),
        ])
    )
    assert broker.applied == [], "registered but not caught up (fenced): still nothing"

    # the controller unfences the new incarnation once its heartbeat reported offset 13
    raft.on_committed(entries(14, [UnfenceBrokerRecord(ME, 13)]))
    assert len(broker.applied) == 1
    image, delta = broker.applied[0]
    assert delta is None, "the first image after catching up goes whole"
    assert image.offset == 14
    assert txn_leader(image) == (3, 4)
    assert not publisher.held

    # from then on every change is published with its delta
    raft.on_committed(entries(15, [PartitionChangeRecord(0, TXN_TOPIC_ID, isr=(3, ME))]))
    assert len(broker.applied) == 2
    image, delta = broker.applied[1]
    assert delta is not None
    assert delta.changed_partitions == {"__transaction_state": {0}}


def test_a_controller_only_node_publishes_at_once() -> None:
    broker = RecordingBroker()
    node = FakeNode(broker, is_broker=False)
    assert node.raft.on_snapshot is not None
    node.raft.on_snapshot(stale_image(), 4)
    assert len(broker.applied) == 1


def test_a_snapshot_names_every_acl_of_the_old_and_the_new_image() -> None:
    """A snapshot replaces the image: the delta names the ACLs that went and those that came,
    so the broker's authorizer drops the first and loads the second."""
    from kafkapy.controller.records import AccessControlEntryRecord

    def acl(i: int) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(uuid.UUID(int=i), 2, f"t{i}", 3, "User:a", "*", 3, 3)

    broker = RecordingBroker()
    node = FakeNode(broker, is_broker=False)
    assert node.raft.on_snapshot is not None
    first, second = MetadataImage(), MetadataImage()
    for offset, record in enumerate([acl(1), acl(2)]):
        first.apply(record, offset)
    for offset, record in enumerate([acl(2), acl(3)]):
        second.apply(record, offset)
    node.raft.on_snapshot(first, 1)
    node.raft.on_snapshot(second, 1)
    delta = broker.applied[-1][1]
    assert delta is not None
    assert delta.changed_acls == {uuid.UUID(int=i) for i in (1, 2, 3)}
