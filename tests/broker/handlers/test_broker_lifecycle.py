"""Broker lifecycle against the active controller in a 3-node cluster (real sockets).

What the cluster relies on: only the active controller answers the controller RPCs (others say
NOT_CONTROLLER so brokers retry elsewhere); stale or foreign brokers are refused; producer id
blocks never overlap; a broker stopping cleanly hands its leaderships over before it goes
(controlled shutdown); a broker that stops heartbeating is fenced after its session and its
partitions get new leaders; when the active controller stops, another voter takes over and
serves requests.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreateTopicsRequest,
    DescribeClusterRequest,
    MetadataRequest,
)
from kafkapy.testing.local import open_cluster
from tests.server.cluster.controller_helpers import (
    active_controller,
    call,
    create_replicated,
    image_of,
    wait_until,
)

pytestmark = pytest.mark.timeout(150)


#: room for the controlled shutdown on a loaded machine (it normally takes a few heartbeats)
GENEROUS_GRACE = {"kafkapy.shutdown.grace.ms": "10000"}


async def test_controller_rpcs_are_answered_by_the_active_controller_only(tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 3) as nodes:
            await wait_until("an active controller", lambda: any(
                n.broker.cluster.controller.active() for n in nodes  # type: ignore[union-attr]
            ))
            leader = active_controller(nodes)
            follower = next(n for n in nodes if n is not leader)
            epoch = follower.broker.cluster.lifecycle.broker_epoch  # type: ignore[union-attr]
            heartbeat = BrokerHeartbeatRequest(
                broker_id=follower.node_id, broker_epoch=epoch, current_metadata_offset=0
            )
            answer = await call(follower.controller_port, ApiKey.BROKER_HEARTBEAT, 1, heartbeat)
            assert answer.error_code == ErrorCode.NOT_CONTROLLER
            answer = await call(leader.controller_port, ApiKey.BROKER_HEARTBEAT, 1, heartbeat)
            assert answer.error_code == ErrorCode.NONE
            assert not answer.is_fenced

            stale = BrokerHeartbeatRequest(
                broker_id=follower.node_id, broker_epoch=epoch + 10_000, current_metadata_offset=0
            )
            answer = await call(leader.controller_port, ApiKey.BROKER_HEARTBEAT, 1, stale)
            assert answer.error_code == ErrorCode.STALE_BROKER_EPOCH

            foreign = BrokerRegistrationRequest(
                broker_id=9, cluster_id="someone-else", incarnation_id=uuid.uuid4()
            )
            answer = await call(leader.controller_port, ApiKey.BROKER_REGISTRATION, 3, foreign)
            assert answer.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
            duplicate = BrokerRegistrationRequest(
                broker_id=follower.node_id,
                cluster_id=follower.broker.cluster_id,
                incarnation_id=uuid.uuid4(),
            )
            answer = await call(leader.controller_port, ApiKey.BROKER_REGISTRATION, 3, duplicate)
            assert answer.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION

            blocks = [
                await n.broker.cluster.channel.allocate_producer_ids()  # type: ignore[union-attr]
                for n in (nodes[0], nodes[1], nodes[0])
            ]
            starts = sorted(start for start, _ in blocks)
            assert all(length == 1000 for _, length in blocks)
            assert starts[1] >= starts[0] + 1000
            assert starts[2] >= starts[1] + 1000

            # AlterPartition by topic name (v1) and by topic id (v2+) is checked against the
            # partition's leader epoch; unknown ids are UNKNOWN_TOPIC_ID.
            await create_replicated(nodes[0].broker_port, "isr-checks", 1)
            part = image_of(leader).topics["isr-checks"].partitions[0]
            owner = next(n for n in nodes if n.node_id == part.leader)
            owner_epoch = owner.broker.cluster.lifecycle.broker_epoch  # type: ignore[union-attr]
            stale = AlterPartitionRequest(
                broker_id=owner.node_id,
                broker_epoch=owner_epoch,
                topics=[
                    AlterPartitionRequest.TopicData(
                        topic_name="isr-checks",
                        partitions=[
                            AlterPartitionRequest.PartitionData(
                                partition_index=0,
                                leader_epoch=part.leader_epoch - 1,
                                new_isr=[owner.node_id],
                                partition_epoch=part.partition_epoch,
                            )
                        ],
                    )
                ],
            )
            answer = await call(leader.controller_port, ApiKey.ALTER_PARTITION, 1, stale)
            assert answer.error_code == ErrorCode.NONE
            assert answer.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
            stale.topics[0].topic_id = uuid.uuid4()
            answer = await call(leader.controller_port, ApiKey.ALTER_PARTITION, 2, stale)
            assert answer.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
            assert image_of(leader).topics["isr-checks"].partitions[0] == part

            # An undecodable entry in the metadata log is skipped by every node, and the
            # controller, whose offset predictions it breaks, resynchronises and carries on.
            garbage = await leader.broker.cluster.raft.propose([b"\xff\xfe not a record"])  # type: ignore[union-attr]
            await create_replicated(nodes[0].broker_port, "after-garbage", 1)
            await create_replicated(nodes[1].broker_port, "after-resync", 1)
            for node in nodes:
                publisher = node.broker.cluster.publisher  # type: ignore[union-attr]
                assert await publisher.wait_for(
                    lambda image: {"after-garbage", "after-resync"} <= set(image.topics), 10
                )
                assert publisher.applied_offset > garbage


async def test_the_active_controllers_own_broker_calls_it_in_process(tmp_path: Path) -> None:
    """A combined node whose Raft replica leads calls its controller in-process: it registers,
    heartbeats and forwards admin writes without a connection to its own controller listener,
    while the other brokers reach it over theirs."""
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 3) as nodes:
            await wait_until("an active controller", lambda: any(
                n.broker.cluster.controller.active() for n in nodes  # type: ignore[union-attr]
            ))
            leader = active_controller(nodes)
            cluster = leader.broker.cluster
            assert cluster is not None
            assert cluster.channel is not None
            assert cluster.lifecycle is not None
            assert cluster.lifecycle.broker_epoch >= 0
            request = CreateTopicsRequest(
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name="via-local-controller", num_partitions=2, replication_factor=3
                    )
                ],
                timeout_ms=20_000,
            )
            response = await cluster.channel.create_topics(request)
            assert response.topics[0].error_code == ErrorCode.NONE
            assert "via-local-controller" in image_of(leader).topics  # applied before it returns
            start, length = await cluster.channel.allocate_producer_ids()
            assert length == 1000
            assert start >= 0
            heartbeat = await cluster.lifecycle.heartbeat()
            assert heartbeat is not None
            assert heartbeat.error_code == ErrorCode.NONE
            assert cluster.channel.peers.node_ids() == []
            assert cluster.lifecycle._heartbeat_peers.node_ids() == []
            for other in nodes:
                if other is not leader:
                    lifecycle = other.broker.cluster.lifecycle  # type: ignore[union-attr]
                    assert lifecycle._heartbeat_peers.node_ids() == [leader.node_id]


async def test_controlled_shutdown_and_session_expiry_move_leadership(tmp_path: Path) -> None:
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3, overrides=GENEROUS_GRACE) as nodes:
            await create_replicated(nodes[0].broker_port, "spread", 6)
            leader = active_controller(nodes)
            others = [n for n in nodes if n is not leader]
            leaving, silent = others
            assert any(
                p.leader == leaving.node_id
                for p in image_of(leader).topics["spread"].partitions.values()
            )

            # Clean stop: the controller moves every leadership away before the broker goes.
            leaving.server.request_shutdown()
            with trio.fail_after(20):
                await leaving.server.stopped.wait()
            image = image_of(leader)
            assert image.brokers[leaving.node_id].fenced
            for part in image.topics["spread"].partitions.values():
                assert part.leader not in (leaving.node_id, -1)
                assert leaving.node_id not in part.isr

            # A broker that stops heartbeating (its Raft replica keeps the quorum alive) is
            # fenced once its session expires.
            lifecycle = silent.broker.cluster.lifecycle  # type: ignore[union-attr]
            lifecycle.heartbeat_interval_s = 3600.0

            def silent_fenced() -> bool:
                reg = image_of(leader).brokers[silent.node_id]
                return bool(reg.fenced)

            await wait_until("the silent broker is fenced", silent_fenced, timeout_s=30)
            for part in image_of(leader).topics["spread"].partitions.values():
                assert part.leader == leader.node_id
                assert part.isr == (leader.node_id,)


async def test_a_new_active_controller_takes_over(tmp_path: Path) -> None:
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3, overrides=GENEROUS_GRACE) as nodes:
            old = active_controller(nodes)
            survivors = [n for n in nodes if n is not old]
            old.server.request_shutdown()
            with trio.fail_after(20):
                await old.server.stopped.wait()

            def taken_over() -> bool:
                return any(
                    n.broker.cluster.controller.active() is not None  # type: ignore[union-attr]
                    for n in survivors
                )

            await wait_until("a new active controller", taken_over)
            new = active_controller(survivors)
            assert new.node_id != old.node_id
            # The old controller's broker left cleanly: fenced in the new controller's image.
            assert image_of(new).brokers[old.node_id].fenced
            request = CreateTopicsRequest(
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name="after-failover", num_partitions=2, replication_factor=2
                    )
                ],
                timeout_ms=20_000,
            )
            for node in survivors:
                answer = await call(node.broker_port, ApiKey.CREATE_TOPICS, 7, request)
                code = answer.topics[0].error_code
                assert code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
                assert "after-failover" in image_of(node).topics
            parts = image_of(new).topics["after-failover"].partitions.values()
            assert all(set(p.replicas) == {n.node_id for n in survivors} for p in parts)


async def test_a_returning_broker_gets_its_preferred_leaderships_back(tmp_path: Path) -> None:
    with trio.fail_after(140):
        overrides = {"leader.imbalance.check.interval.seconds": "1"}
        async with open_cluster(tmp_path, 3, overrides=overrides) as nodes:
            await create_replicated(nodes[0].broker_port, "preferred", 3)
            leader = active_controller(nodes)
            away = next(n for n in nodes if n is not leader)
            publisher = leader.broker.cluster.publisher  # type: ignore[union-attr]

            def leads(image: Any, broker_id: int) -> bool:
                return any(p.leader == broker_id for p in image.topics["preferred"].partitions.values())

            assert leads(publisher.image, away.node_id)
            lifecycle = away.broker.cluster.lifecycle  # type: ignore[union-attr]
            lifecycle.heartbeat_interval_s = 3600.0
            assert await publisher.wait_for(lambda image: image.brokers[away.node_id].fenced, 30)
            assert not leads(publisher.image, away.node_id)

            # Heartbeats resume: unfenced, back in the ISRs, then preferred leader again.
            lifecycle.heartbeat_interval_s = 0.5
            lifecycle.wake()

            def balanced(image: Any) -> bool:
                parts = image.topics["preferred"].partitions.values()
                return not image.brokers[away.node_id].fenced and all(
                    p.leader == p.replicas[0] and away.node_id in p.isr for p in parts
                )

            assert await publisher.wait_for(balanced, 60)
            assert leads(publisher.image, away.node_id)


async def test_broker_rack_is_registered_and_reported_to_clients(tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with open_cluster(tmp_path, 2, overrides={"broker.rack": "zone-1"}) as nodes:
            assert {b.rack for b in image_of(nodes[0]).brokers.values()} == {"zone-1"}
            metadata = await call(nodes[1].broker_port, ApiKey.METADATA, 12, MetadataRequest(topics=[]))
            assert [(b.node_id, b.rack) for b in metadata.brokers] == [(1, "zone-1"), (2, "zone-1")]
            described = await call(nodes[0].broker_port, ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest())
            assert {b.rack for b in described.brokers} == {"zone-1"}
