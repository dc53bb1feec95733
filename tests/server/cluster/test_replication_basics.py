"""Data plane across three in-process brokers: replication, HW, acks=all, roles and Metadata."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DescribeClusterRequest,
    DescribeTopicPartitionsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
)
from kafkapy.protocol.records import iter_batches
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for
from tests.server.helpers import Client, batch

pytestmark = pytest.mark.timeout(120)


def _leader(controller: object, topic: str, partition: int = 0) -> int:
    return controller.image.topics[topic].partitions[partition].leader  # type: ignore[attr-defined, no-any-return]


async def _fetch(client: Client, topic: str, offset: int, *, version: int = 12,
                 current_leader_epoch: int = -1) -> object:
    req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
            current_leader_epoch=current_leader_epoch,
        )])
    ])
    response = await client.request(ApiKey.FETCH, version, req)
    return response.responses[0].partitions[0]


async def test_acks_all_replicates_to_every_replica_and_moves_the_hw(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            leader = nodes[_leader(controller, "t")]
            client = await leader.client()
            for i in range(5):
                answer = await produce(client, "t", batch(b"a%d" % i, b"b%d" % i), acks=-1)
                assert answer.error_code == ErrorCode.NONE
                assert answer.base_offset == 2 * i
            plog = leader.broker.logs.get("t", 0)
            assert plog is not None
            assert plog.high_watermark == plog.log_end_offset == 10
            data = plog.read_bytes(0, 1 << 20)
            epochs = {h.partition_leader_epoch for _, h in iter_batches(data)}
            assert epochs == {controller.image.topics["t"].partitions[0].leader_epoch}
            for node in nodes.values():
                copy = node.broker.logs.get("t", 0)
                assert copy is not None
                # acks=all answered: every ISR member holds the batches, byte for byte
                assert copy.log_end_offset >= 10
                assert copy.read_bytes(0, 1 << 20)[: len(data)] == data
            # followers learn the HW on their next fetch
            await wait_for(lambda: all(n.broker.logs.get("t", 0).high_watermark == 10  # type: ignore[union-attr]
                                       for n in nodes.values()), what="follower HWs")
            consumer_view = await _fetch(client, "t", 0)
            assert consumer_view.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
            assert consumer_view.high_watermark == 10  # type: ignore[attr-defined]
            await client.aclose()


async def test_non_leaders_refuse_produce_fetch_and_list_offsets(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            follower = next(n for i, n in nodes.items() if i != _leader(controller, "t"))
            client = await follower.client()
            answer = await produce(client, "t", batch(b"x"), acks=1)
            assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # Before Fetch v11 a consumer's fetch carries no client metadata, so only the leader
            # serves it; from v11 on a follower serves it up to its high watermark (KIP-392, as
            # Kafka's fetchOnlyFromLeader rule), which test_follower_fetching covers.
            fetched = await _fetch(client, "t", 0, version=10)
            assert fetched.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]
            served = await _fetch(client, "t", 0, version=12)
            assert served.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
            req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)]
            )])
            listed = await client.request(ApiKey.LIST_OFFSETS, 7, req)
            assert listed.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            await client.aclose()


async def test_leader_epoch_checks(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_cluster(tmp_path, count=2) as (controller, nodes):
            controller.create_topic("t", rf=2)
            leader = nodes[_leader(controller, "t")]
            epoch = controller.image.topics["t"].partitions[0].leader_epoch
            client = await leader.client()
            assert (await produce(client, "t", batch(b"x"), acks=-1)).error_code == ErrorCode.NONE
            older = await _fetch(client, "t", 0, current_leader_epoch=epoch - 1) if epoch > 0 else None
            if older is not None:
                assert older.error_code == ErrorCode.FENCED_LEADER_EPOCH  # type: ignore[attr-defined]
            newer = await _fetch(client, "t", 0, current_leader_epoch=epoch + 1)
            assert newer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH  # type: ignore[attr-defined]
            same = await _fetch(client, "t", 0, current_leader_epoch=epoch)
            assert same.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
            req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic="t", partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=epoch, leader_epoch=epoch)]
            )])
            answer = (await client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, req)).topics[0].partitions[0]
            assert answer.error_code == ErrorCode.NONE
            assert (answer.leader_epoch, answer.end_offset) == (epoch, 1)
            await client.aclose()


async def test_metadata_from_the_image(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", partitions=3, rf=2)
            client = await nodes[2].client()
            response = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
            assert sorted((b.node_id, b.port) for b in response.brokers) == sorted(
                (i, n.port) for i, n in nodes.items()
            )
            assert response.controller_id in nodes
            [topic] = response.topics
            assert topic.name == "t"
            for p in topic.partitions:
                image = controller.image.topics["t"].partitions[p.partition_index]
                assert p.error_code == ErrorCode.NONE
                assert p.leader_id == image.leader
                assert p.leader_epoch == image.leader_epoch
                assert p.replica_nodes == list(image.replicas)
                assert p.isr_nodes == list(image.isr)
                assert p.offline_replicas == []
            # auto-creation goes through the controller, and the answer carries the new leader
            created = await client.request(ApiKey.METADATA, 12, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True,
            ))
            assert created.topics[0].error_code == ErrorCode.NONE
            assert created.topics[0].partitions[0].leader_id in nodes
            assert "auto" in controller.image.topics
            await client.aclose()


async def test_describe_cluster_and_topic_partitions_from_the_image(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", partitions=2, rf=3)
            client = await nodes[3].client()
            described = await client.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=1))
            assert described.error_code == ErrorCode.NONE
            assert sorted((b.broker_id, b.port) for b in described.brokers) == sorted(
                (i, n.port) for i, n in nodes.items()
            )
            assert described.controller_id in nodes
            controllers = await client.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=2))
            assert controllers.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            req = DescribeTopicPartitionsRequest(
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name="t")], response_partition_limit=100
            )
            [topic] = (await client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, req)).topics
            for p in topic.partitions:
                image = controller.image.topics["t"].partitions[p.partition_index]
                assert (p.leader_id, p.leader_epoch) == (image.leader, image.leader_epoch)
                assert (p.replica_nodes, p.isr_nodes) == (list(image.replicas), list(image.isr))
            await client.aclose()
