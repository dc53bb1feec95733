"""The partition facade's lookup (`Partitions.leader`), the one leader/epoch check every
partition API answers with: leader, not the leader, a fenced or unknown client epoch, an
unknown topic or partition - on a single node and on a cluster node whose roles come from a
metadata image.

What users rely on: a client that names a stale leader epoch is told FENCED_LEADER_EPOCH (it
refreshes its metadata), one ahead of the broker UNKNOWN_LEADER_EPOCH (it retries), a request
to a replica that does not lead NOT_LEADER_OR_FOLLOWER, and the leader's epoch comes back with
the leader's own log (what Produce stamps on the batches and ListOffsets returns).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.broker.partitions import INLINE_WALK_RECORDS, LeaderPartition, Partitions, costly_walk
from kafkapy.controller.image import MetadataImage
from kafkapy.controller.records import (
    Endpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ProduceRequest
from kafkapy.protocol.records import Compression, Record, build_batch
from kafkapy.server.broker import Broker
from tests.server.cluster.replication_helpers import node_settings
from tests.server.helpers import Client, NodeThread, batch, build_node, create_topic

LED_EPOCH = 5  # the leader epoch of the partition the cluster node leads
_epochs = st.integers(-(2**31), 2**31 - 1)
_lookup_settings = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _expected(current_leader_epoch: int, leader_epoch: int) -> ErrorCode | None:
    """Kafka's rule, written out: None = the lookup finds the leader."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return None
    return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


@pytest.fixture
def single(tmp_path: Path) -> Iterator[Broker]:
    """A running single node with topic `t` (2 partitions), looked up from the test's thread."""
    node = NodeThread(tmp_path)
    try:
        node.call(create_topic, node.port, "t", 2)
        assert node.broker is not None
        yield node.broker
    finally:
        node.stop()


def _image() -> MetadataImage:
    """Node 1's view: it leads t-0 (epoch LED_EPOCH), follows t-1 (leader 2), and holds no
    replica of `elsewhere`."""
    image = MetadataImage()
    records: list[MetadataRecord] = []
    for node in (1, 2):
        records += [
            RegisterBrokerRecord(node, uuid.uuid4(), 10 + node, (Endpoint("PLAINTEXT", "127.0.0.1", 1),), None),
            UnfenceBrokerRecord(node, 10 + node),
        ]
    t, elsewhere = uuid.uuid4(), uuid.uuid4()
    records += [
        TopicRecord("t", t),
        PartitionRecord(0, t, (1, 2), (1, 2), leader=1, leader_epoch=LED_EPOCH),
        PartitionRecord(1, t, (2, 1), (2, 1), leader=2, leader_epoch=3),
        TopicRecord("elsewhere", elsewhere),
        PartitionRecord(0, elsewhere, (2,), (2,), leader=2, leader_epoch=1),
    ]
    for offset, record in enumerate(records):
        image.apply(record, offset)
    return image


@pytest.fixture
def clustered(tmp_path: Path) -> Iterator[Broker]:
    """Node 1 of a cluster (built, not started), with `_image()` published to it."""

    async def publish() -> Broker:  # the node's parts and partition roles keep trio time
        broker = build_node(tmp_path, node_settings(1, tmp_path)).broker
        broker.apply_metadata(_image(), None)
        return broker

    broker = trio.run(publish)
    try:
        yield broker
    finally:
        broker.close()


def test_single_node_leads_every_partition_in_epoch_0(single: Broker) -> None:
    partitions = single.partitions
    for p in (0, 1):
        lp = partitions.leader("t", p)
        assert isinstance(lp, LeaderPartition)
        assert (lp.topic, lp.partition, lp.leader_epoch) == ("t", p, 0)
        assert lp.log is single.logs.get("t", p)


def test_cluster_node_answers_for_the_partitions_it_leads(clustered: Broker) -> None:
    partitions = clustered.partitions
    lp = partitions.leader("t", 0)
    assert isinstance(lp, LeaderPartition)
    assert lp.leader_epoch == LED_EPOCH
    assert lp.log is clustered.logs.get("t", 0)
    # a follower replica (its log is here) and a partition with no replica here
    assert clustered.logs.get("t", 1) is not None
    assert partitions.leader("t", 1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partitions.leader("elsewhere", 0) is ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize("model", ["single", "clustered"])
def test_unknown_topics_and_partitions(model: str, request: pytest.FixtureRequest) -> None:
    partitions: Partitions = request.getfixturevalue(model).partitions
    for topic, partition in [("missing", 0), ("t", 2), ("t", -1), ("", 0)]:
        assert partitions.leader(topic, partition) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert partitions.leader(topic, partition, 0) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize(("current", "expected"), [
    (LED_EPOCH - 1, ErrorCode.FENCED_LEADER_EPOCH),
    (0, ErrorCode.FENCED_LEADER_EPOCH),
    (LED_EPOCH + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
    (LED_EPOCH, None),
    (-1, None),
])
def test_cluster_epoch_checks(clustered: Broker, current: int, expected: ErrorCode | None) -> None:
    found = clustered.partitions.leader("t", 0, current)
    if expected is None:
        assert isinstance(found, LeaderPartition)
        assert found.leader_epoch == LED_EPOCH
    else:
        assert found is expected


def test_not_leader_wins_over_the_epoch_check(clustered: Broker) -> None:
    """Off the leader, the client's epoch is not compared (it may be the real leader's)."""
    assert clustered.partitions.leader("t", 1, 3) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert clustered.partitions.leader("t", 1, 99) is ErrorCode.NOT_LEADER_OR_FOLLOWER


@_lookup_settings
@given(current=_epochs)
def test_any_client_epoch_on_a_single_node(single: Broker, current: int) -> None:
    found = single.partitions.leader("t", 1, current)
    expected = _expected(current, 0)
    if expected is None:
        assert isinstance(found, LeaderPartition)
        assert found.leader_epoch == 0
    else:
        assert found is expected


@_lookup_settings
@given(current=_epochs)
def test_any_client_epoch_on_a_cluster_leader(clustered: Broker, current: int) -> None:
    found = clustered.partitions.leader("t", 0, current)
    expected = _expected(current, LED_EPOCH)
    if expected is None:
        assert isinstance(found, LeaderPartition)
        assert found.leader_epoch == LED_EPOCH
    else:
        assert found is expected


async def _produce_one(port: int) -> None:
    client = await Client.connect(port)
    try:
        request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"x"))])])
        answer = await client.request(ApiKey.PRODUCE, 9, request)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    finally:
        await client.aclose()


def test_single_node_end_offset_for_epoch(single: Broker) -> None:
    """OffsetForLeaderEpoch on one node, as on any leader: its writes are in epoch 0, so epoch
    0 - and a later epoch a client names (the largest at or below it is 0) - ends at the log
    end."""
    port = next(iter(single.endpoints.values()))[1]
    trio.run(_produce_one, port)
    partitions = single.partitions
    lp = partitions.leader("t", 0)
    assert isinstance(lp, LeaderPartition)
    assert partitions.end_offset_for_epoch(lp, 0) == (0, 1)
    assert partitions.end_offset_for_epoch(lp, 1) == (0, 1)


def test_a_consumer_may_read_a_follower_replica_but_not_a_partition_held_elsewhere(clustered: Broker) -> None:
    """KIP-392: Fetch v11+ from a consumer is served by any replica (`Partitions.replica`)."""
    partitions = clustered.partitions
    follower = partitions.replica("t", 1)
    assert isinstance(follower, LeaderPartition)
    assert (follower.leader_epoch, follower.role.is_leader) == (3, False)
    assert follower.log is clustered.logs.get("t", 1)
    assert partitions.replica("t", 1, 2) is ErrorCode.FENCED_LEADER_EPOCH
    assert partitions.replica("elsewhere", 0) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partitions.replica("missing", 0) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_follower_refuses_offsets_above_its_high_watermark_or_outside_its_log(clustered: Broker) -> None:
    follower = clustered.partitions.replica("t", 1)
    assert isinstance(follower, LeaderPartition)
    plog = follower.log
    plog.append_as_follower(batch(b"a", b"b", b"c"))  # replicated, not yet committed
    plog.high_watermark = 1
    check = Partitions.read_error_on_follower
    assert check(follower, 0) is None
    assert check(follower, 1) is None  # at the high watermark: nothing yet, no error
    assert check(follower, 2) is ErrorCode.OFFSET_NOT_AVAILABLE
    assert check(follower, 3) is ErrorCode.OFFSET_NOT_AVAILABLE
    assert check(follower, 4) is ErrorCode.OFFSET_OUT_OF_RANGE
    assert check(follower, -1) is ErrorCode.OFFSET_OUT_OF_RANGE


def _racked_image(isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2)) -> MetadataImage:
    """Node 1 (rack a) leads t-0 with a follower on node 2 (rack b), in-sync per `isr` (and
    any other `replicas`, on node 3 in rack b)."""
    image = MetadataImage()
    t = uuid.UUID(int=7)
    records: list[MetadataRecord] = []
    for node, rack in ((1, "a"), (2, "b"), (3, "b")):
        records += [
            RegisterBrokerRecord(node, uuid.UUID(int=node), 10 + node, (Endpoint("PLAINTEXT", "127.0.0.1", 1),), rack),
            UnfenceBrokerRecord(node, 10 + node),
        ]
    shrunk = len(isr) == 1  # an ISR change bumps the partition epoch, as a reassignment does
    moved = replicas != (1, 2)
    records += [
        TopicRecord("t", t),
        PartitionRecord(0, t, replicas, isr, leader=1, leader_epoch=LED_EPOCH,
                        partition_epoch=int(shrunk) + int(moved)),
    ]
    for offset, record in enumerate(records):
        image.apply(record, offset)
    return image


def publish(broker: Broker, image: MetadataImage) -> None:
    """What the node's metadata publisher does: the image is the node's, then applied."""
    broker.cluster.publisher.image = image  # type: ignore[union-attr]
    broker.apply_metadata(image, None)


def test_the_leader_names_the_in_sync_follower_of_the_consumers_rack_only(tmp_path: Path) -> None:
    """KIP-392 on the leader: a rack-b consumer is sent to node 2 while it is in the ISR and
    covers the offset; a rack-a consumer stays; once node 2 leaves the ISR nobody is named."""

    async def check() -> None:
        broker = build_node(tmp_path, node_settings(1, tmp_path)).broker
        try:
            publish(broker, _racked_image((1, 2)))
            partitions = broker.partitions
            lp = partitions.leader("t", 0)
            assert isinstance(lp, LeaderPartition)
            assert partitions.follower_fetch(lp, 2, 0, -1, 0, report=True) is None
            assert partitions.preferred_read_replica(lp, 0, "b", "PLAINTEXT") == 2
            assert partitions.preferred_read_replica(lp, 0, "a", "PLAINTEXT") == -1
            assert partitions.preferred_read_replica(lp, 5, "b", "PLAINTEXT") == -1  # beyond its log
            assert partitions.preferred_read_replica(lp, 0, "b", "SSL") == -1  # no endpoint there
            publish(broker, _racked_image((1,)))
            lp = partitions.leader("t", 0)
            assert isinstance(lp, LeaderPartition)
            assert partitions.preferred_read_replica(lp, 0, "b", "PLAINTEXT") == -1
        finally:
            broker.close()

    trio.run(check)


def test_the_leader_refuses_a_follower_it_does_not_know_yet_until_it_learns_of_it(tmp_path: Path) -> None:
    """A broker that applied a reassignment adding it before the leader did is answered
    REPLICA_NOT_AVAILABLE (Kafka's NotAssignedReplicaException), not served: served, it would
    catch up while the leader ignored its progress and then sit idle in its fetch session,
    never reported again and never added to the ISR. Once the leader knows, its fetch counts."""

    async def check() -> None:
        broker = build_node(tmp_path, node_settings(1, tmp_path)).broker
        try:
            publish(broker, _racked_image((1, 2)))
            partitions = broker.partitions
            lp = partitions.leader("t", 0)
            assert isinstance(lp, LeaderPartition)
            assert partitions.follower_fetch(lp, 3, 0, -1, 0, report=True) is ErrorCode.REPLICA_NOT_AVAILABLE
            assert lp.role.leader_state is not None
            assert lp.role.leader_state.follower_leo(3) == -1
            publish(broker, _racked_image((1, 2), replicas=(1, 2, 3)))
            lp = partitions.leader("t", 0)
            assert isinstance(lp, LeaderPartition)
            assert partitions.follower_fetch(lp, 3, 0, -1, 0, report=True) is None
            assert lp.role.leader_state is not None
            assert lp.role.leader_state.follower_leo(3) == 0
        finally:
            broker.close()

    trio.run(check)


def _records(n: int, codec: Compression = Compression.NONE) -> bytes:
    return build_batch([Record(i, 0, None, b"v") for i in range(n)], base_timestamp=0, compression=codec)


def test_a_walk_leaves_the_event_loop_when_compressed_or_many_records() -> None:
    """What `append` walks in a worker thread: any compressed batch (its inflated size is known
    only once inflated) and more than INLINE_WALK_RECORDS records, over all batches; bytes that
    do not frame stay on the loop, where the log refuses them before walking."""
    assert not costly_walk(_records(INLINE_WALK_RECORDS))
    assert costly_walk(_records(INLINE_WALK_RECORDS + 1))
    assert costly_walk(_records(1, Compression.LZ4))
    assert costly_walk(_records(1) + _records(1, Compression.ZSTD))
    half = _records(INLINE_WALK_RECORDS // 2 + 1)
    assert costly_walk(half + half)
    assert not costly_walk(b"\x00" * 100)
