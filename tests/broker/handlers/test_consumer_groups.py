"""ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848) through a running broker.

Real sockets on 127.0.0.1:0 and our own codec: what a consumer-protocol client sees on the wire
(topic ids in assignments, member ids, epochs, error codes), ListGroups' `consumer` type, and
that a restarted broker reloads the group from `__consumer_offsets`.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio

from kafkapy.broker.handlers.consumer_groups import _replica_racks
from kafkapy.controller.image import BrokerRegistration, MetadataImage, PartitionImage, TopicImage
from kafkapy.coordinator.group import CONSUMER_OFFSETS_TOPIC, offsets_partition_for
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
)
from tests.server.cluster.test_coordinators_partitioned import (
    lead,
    offsets_topic_made,
    partitioned_broker,
)
from tests.server.helpers import Client, create_topic, find_coordinator, running_broker
from tests.server.test_group_write_failures import read_only_disk

E = ErrorCode
TP = ConsumerGroupHeartbeatRequest.TopicPartitions


async def beat(c: Client, version: int = 1, **fields: Any) -> Any:
    fields.setdefault("group_id", "g")
    fields.setdefault("rebalance_timeout_ms", 30_000)
    return await c.request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, version, ConsumerGroupHeartbeatRequest(**fields)
    )


def assigned(r: Any) -> dict[uuid.UUID, list[int]]:
    assert r.assignment is not None
    return {tp.topic_id: sorted(tp.partitions) for tp in r.assignment.topic_partitions}


async def test_two_members_split_then_one_leaves(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            tid = (await create_topic(port, "t", 4)).topic_id
            a = await beat(
                c, member_id="a", member_epoch=0, subscribed_topic_names=["t"], topic_partitions=[]
            )
            assert (a.error_code, a.member_id, a.member_epoch) == (E.NONE, "a", 1)
            assert a.heartbeat_interval_ms == 5000
            assert assigned(a) == {tid: [0, 1, 2, 3]}
            b = await beat(
                c, member_id="b", member_epoch=0, subscribed_topic_names=["t"], topic_partitions=[]
            )
            assert (b.error_code, b.member_epoch, assigned(b)) == (E.NONE, 2, {})
            a = await beat(c, member_id="a", member_epoch=1)  # learns what to revoke
            assert a.member_epoch == 1
            keep = assigned(a)[tid]
            assert len(keep) == 2
            a = await beat(
                c,
                member_id="a",
                member_epoch=1,
                topic_partitions=[TP(topic_id=tid, partitions=keep)],
            )
            assert a.member_epoch == 2
            b = await beat(c, member_id="b", member_epoch=2)
            assert sorted(assigned(b)[tid] + keep) == [0, 1, 2, 3]
            d = await c.request(
                ApiKey.CONSUMER_GROUP_DESCRIBE,
                0,
                ConsumerGroupDescribeRequest(group_ids=["g", "nope"]),
            )
            g, nope = d.groups
            assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (
                E.NONE,
                "Stable",
                2,
                "uniform",
            )
            assert sorted(m.member_id for m in g.members) == ["a", "b"]
            assert {
                m.member_id: m.assignment.topic_partitions[0].topic_name for m in g.members
            } == {"a": "t", "b": "t"}
            assert nope.error_code == E.GROUP_ID_NOT_FOUND
            left = await beat(c, member_id="b", member_epoch=-1)
            assert (left.error_code, left.member_epoch) == (E.NONE, -1)
            a = await beat(
                c,
                member_id="a",
                member_epoch=2,
                topic_partitions=[TP(topic_id=tid, partitions=keep)],
            )
            assert (a.member_epoch, assigned(a)) == (3, {tid: [0, 1, 2, 3]})
            listed = await c.request(ApiKey.LIST_GROUPS, 5, ListGroupsRequest())
            assert [
                (x.group_id, x.protocol_type, x.group_state, x.group_type) for x in listed.groups
            ] == [("g", "consumer", "Stable", "consumer")]
            await c.aclose()


async def test_group_survives_a_restart(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            tid = (await create_topic(port, "t", 2)).topic_id
            a = await beat(
                c,
                version=0,
                member_id="",
                member_epoch=0,
                subscribed_topic_names=["t"],
                topic_partitions=[],
            )
            member_id = a.member_id
            assert member_id, "v0: the coordinator names a joining member"
            await c.aclose()
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            again = await beat(
                c,
                version=0,
                member_id=member_id,
                member_epoch=1,
                topic_partitions=[TP(topic_id=tid, partitions=[0, 1])],
            )
            assert (again.error_code, again.member_epoch) == (E.NONE, 1)
            assert assigned(again) == {tid: [0, 1]}
            stale = await beat(c, member_id=member_id, member_epoch=5)
            assert stale.error_code == E.FENCED_MEMBER_EPOCH
            await c.aclose()


async def test_bad_heartbeats_get_error_codes() -> None:
    with trio.fail_after(60):
        async with running_broker(None) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            await create_topic(port, "t", 1)
            r = await beat(c, member_id="", member_epoch=0, subscribed_topic_names=["t"])
            assert r.error_code == E.INVALID_REQUEST  # v1: the client names itself
            r = await beat(c, member_id="m", member_epoch=0, subscribed_topic_regex="t.*")
            assert r.error_code == E.INVALID_REQUEST
            r = await beat(
                c,
                member_id="m",
                member_epoch=0,
                subscribed_topic_names=["t"],
                server_assignor="sticky",
            )
            assert r.error_code == E.UNSUPPORTED_ASSIGNOR
            r = await beat(c, member_id="ghost", member_epoch=3)
            assert r.error_code == E.GROUP_ID_NOT_FOUND
            # owned partitions of an unknown topic id are ignored, not an error
            r = await beat(
                c,
                member_id="m",
                member_epoch=0,
                subscribed_topic_names=["t"],
                topic_partitions=[TP(topic_id=uuid.uuid4(), partitions=[7])],
            )
            assert (r.error_code, r.member_epoch) == (E.NONE, 1)
            # a classic JoinGroup for the consumer group is refused clearly
            j = await c.request(
                ApiKey.JOIN_GROUP,
                9,
                JoinGroupRequest(
                    group_id="g",
                    session_timeout_ms=10_000,
                    rebalance_timeout_ms=10_000,
                    member_id="",
                    protocol_type="consumer",
                    protocols=[
                        JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")
                    ],
                ),
            )
            assert j.error_code == E.INCONSISTENT_GROUP_PROTOCOL
            await c.aclose()


async def test_failed_write_answers_not_coordinator_and_keeps_the_log_state(
    tmp_path: Path,
) -> None:
    """A heartbeat whose records cannot be appended: the member is told NOT_COORDINATOR (find
    the coordinator again), and the group stays as the log has it - the join never happened."""
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (broker, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            tid = (await create_topic(port, "t", 2)).topic_id
            a = await beat(c, member_id="a", member_epoch=0, subscribed_topic_names=["t"])
            assert a.error_code == E.NONE
            with read_only_disk(broker):
                b = await beat(c, member_id="b", member_epoch=0, subscribed_topic_names=["t"])
                assert b.error_code == E.NOT_COORDINATOR
            d = await c.request(
                ApiKey.CONSUMER_GROUP_DESCRIBE, 0, ConsumerGroupDescribeRequest(group_ids=["g"])
            )
            assert [m.member_id for m in d.groups[0].members] == ["a"]
            assert d.groups[0].group_epoch == 1
            # the disk is back: the same join now works and splits the partitions
            b = await beat(c, member_id="b", member_epoch=0, subscribed_topic_names=["t"])
            assert (b.error_code, b.member_epoch) == (E.NONE, 2)
            a = await beat(
                c,
                member_id="a",
                member_epoch=1,
                topic_partitions=[TP(topic_id=tid, partitions=[0, 1])],
            )
            assert len(assigned(a)[tid]) == 1
            await c.aclose()


async def test_partitioned_coordinator_moves_and_reloads_the_group(tmp_path: Path) -> None:
    """Cluster mode's per-partition coordinators: a consumer group is answered only where its
    `__consumer_offsets` partition is led, and a partition whose leadership comes back is
    reloaded from its log, members, epochs and assignments included."""
    partition = offsets_partition_for("g", 3)
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (_, groups, _, port):
            c = await Client.connect(port)
            tid = (await create_topic(port, "t", 2)).topic_id
            await offsets_topic_made(c, "g")
            r = await beat(c, member_id="a", member_epoch=0, subscribed_topic_names=["t"])
            assert r.error_code == E.NOT_COORDINATOR
            await lead(groups, CONSUMER_OFFSETS_TOPIC, partition, 1)
            r = await beat(c, member_id="a", member_epoch=0, subscribed_topic_names=["t"])
            assert (r.error_code, r.member_epoch, assigned(r)) == (E.NONE, 1, {tid: [0, 1]})
            groups.on_become_follower(CONSUMER_OFFSETS_TOPIC, partition, 2)
            r = await beat(c, member_id="a", member_epoch=1)
            assert r.error_code == E.NOT_COORDINATOR
            await lead(groups, CONSUMER_OFFSETS_TOPIC, partition, 3)
            r = await beat(
                c,
                member_id="a",
                member_epoch=1,
                topic_partitions=[TP(topic_id=tid, partitions=[0, 1])],
            )
            assert (r.error_code, r.member_epoch, assigned(r)) == (E.NONE, 1, {tid: [0, 1]})
            await c.aclose()


def test_the_assignor_gets_each_partitions_replica_racks() -> None:
    """KIP-881 input: a partition's racks are its replicas' brokers' `broker.rack` (a broker
    without one adds none; an unknown topic has none)."""
    image = MetadataImage()
    for broker_id, rack in ((1, "a"), (2, "b"), (3, None)):
        image.brokers[broker_id] = BrokerRegistration(broker_id, 1, uuid.uuid4(), (), rack)
    topic = TopicImage("t", uuid.uuid4())
    topic.partitions[0] = PartitionImage(replicas=(1, 2), isr=(1, 2), leader=1)
    topic.partitions[1] = PartitionImage(replicas=(3, 2), isr=(3,), leader=3)
    topic.partitions[2] = PartitionImage(replicas=(3,), isr=(3,), leader=3)
    image.topics["t"] = topic
    ports: Any = SimpleNamespace(metadata=SimpleNamespace(image=image))
    assert _replica_racks(ports, "t") == [frozenset({"a", "b"}), frozenset({"b"}), frozenset()]
    assert _replica_racks(ports, "missing") is None
