"""Leader-only admin requests and ElectLeaders in a three-node cluster (in-process).

What clients rely on:
- DeleteRecords and DescribeProducers are answered by the partition's leader only; any other
  broker says NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata and retries there.
- A DeleteRecords answer means every live replica moved its log start: a fail-over afterwards
  cannot bring the deleted records back (Kafka's low watermark).
- DescribeLogDirs on a broker lists the replicas that broker hosts, and nothing else.
- ElectLeaders is decided by the active controller and answered per partition as Kafka does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    ElectLeadersRequest,
    ListOffsetsRequest,
)
from kafkapy.server.cluster.peer import PeerClient
from kafkapy.testing.local import LocalNode, open_cluster
from tests.server.cluster.replication_helpers import produce
from tests.server.helpers import Client, batch

pytestmark = pytest.mark.timeout(120)

PREFERRED, UNCLEAN = 0, 1


async def call(port: int, api: ApiKey, version: int, body: Any) -> Any:
    client = PeerClient("127.0.0.1", port, client_id="admin-leadership-test")
    try:
        return await client.request(api, version, body, timeout_s=30)
    finally:
        await client.aclose()


async def create(port: int, name: str, partitions: int, rf: int) -> None:
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=rf
            )
        ],
        timeout_ms=20_000,
    )
    response = await call(port, ApiKey.CREATE_TOPICS, 7, request)
    assert response.topics[0].error_code == ErrorCode.NONE, response.topics[0].error_message


def image(node: LocalNode) -> Any:
    cluster = node.broker.cluster
    assert cluster is not None
    return cluster.image


async def wait_image(node: LocalNode, predicate: Any, what: str) -> None:
    cluster = node.broker.cluster
    assert cluster is not None
    assert await cluster.publisher.wait_for(predicate, 20), f"node {node.node_id}: {what}"


async def wait_in_sync(nodes: list[LocalNode], topic: str, partitions: int, rf: int) -> None:
    """Every node's image shows every partition led with its whole ISR."""

    def ok(img: Any) -> bool:
        t = img.topics.get(topic)
        return (
            t is not None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 and len(p.isr) == rf for p in t.partitions.values())
        )

    for node in nodes:
        await wait_image(node, ok, f"{topic} in sync")


def delete_records(topic: str, partition: int, offset: int, timeout_ms: int = 10_000) -> Any:
    return DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                name=topic,
                partitions=[
                    DeleteRecordsRequest.DeleteRecordsPartition(
                        partition_index=partition, offset=offset
                    )
                ],
            )
        ],
        timeout_ms=timeout_ms,
    )


def describe_producers(topic: str, partition: int) -> Any:
    return DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])]
    )


async def test_leader_only_requests_and_log_dirs(tmp_path: Path) -> None:
    with trio.fail_after(100):
        async with open_cluster(tmp_path, 3) as nodes:
            by_id = {n.node_id: n for n in nodes}
            await create(nodes[0].broker_port, "dr", 1, 3)
            await create(nodes[0].broker_port, "solo", 3, 1)
            await wait_in_sync(nodes, "dr", 1, 3)
            await wait_in_sync(nodes, "solo", 3, 1)
            leader = by_id[image(nodes[0]).partition("dr", 0).leader]
            follower = next(n for n in nodes if n is not leader)

            client = await Client.connect(leader.broker_port)
            try:
                for i in range(10):
                    res = await produce(client, "dr", batch(b"v%d" % i))
                    assert res.error_code == ErrorCode.NONE
            finally:
                await client.aclose()

            # Off the leader: NOT_LEADER_OR_FOLLOWER, and nothing moves.
            off = await call(
                follower.broker_port, ApiKey.DELETE_RECORDS, 2, delete_records("dr", 0, 6)
            )
            assert off.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert all(n.broker.logs.get("dr", 0).log_start_offset == 0 for n in nodes)  # type: ignore[union-attr]
            producers = await call(
                follower.broker_port, ApiKey.DESCRIBE_PRODUCERS, 0, describe_producers("dr", 0)
            )
            assert producers.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            producers = await call(
                leader.broker_port, ApiKey.DESCRIBE_PRODUCERS, 0, describe_producers("dr", 0)
            )
            assert producers.topics[0].partitions[0].error_code == ErrorCode.NONE
            unknown = await call(
                follower.broker_port, ApiKey.DESCRIBE_PRODUCERS, 0, describe_producers("dr", 4)
            )
            assert (
                unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )

            # On the leader: the answer comes once every replica moved its log start.
            done = await call(
                leader.broker_port, ApiKey.DELETE_RECORDS, 2, delete_records("dr", 0, 6)
            )
            part = done.topics[0].partitions[0]
            assert (part.error_code, part.low_watermark) == (ErrorCode.NONE, 6)
            assert [n.broker.logs.get("dr", 0).log_start_offset for n in nodes] == [6, 6, 6]  # type: ignore[union-attr]
            # No time to wait (timeout 0): the leader moved, the followers had not reported it
            # yet, so REQUEST_TIMED_OUT with the low watermark as it stands; they follow anyway.
            hurried = await call(
                leader.broker_port,
                ApiKey.DELETE_RECORDS,
                2,
                delete_records("dr", 0, 8, timeout_ms=0),
            )
            part = hurried.topics[0].partitions[0]
            assert (part.error_code, part.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, 6)
            with trio.fail_after(10):
                while {n.broker.logs.get("dr", 0).log_start_offset for n in nodes} != {8}:  # type: ignore[union-attr]  # noqa: ASYNC110
                    await trio.sleep(0.05)
            beyond = await call(
                leader.broker_port, ApiKey.DELETE_RECORDS, 2, delete_records("dr", 0, 11)
            )
            assert beyond.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            missing = await call(
                leader.broker_port, ApiKey.DELETE_RECORDS, 2, delete_records("dr", 3, 1)
            )
            assert (
                missing.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )

            # DescribeLogDirs: only hosted replicas, even with a stray log left on disk.
            for node in nodes:
                stray = next(
                    p
                    for p in range(3)
                    if node.node_id not in image(node).partition("solo", p).replicas
                )
                node.broker.logs.get_or_create("solo", stray)
                dirs = await call(
                    node.broker_port,
                    ApiKey.DESCRIBE_LOG_DIRS,
                    4,
                    DescribeLogDirsRequest(topics=None),
                )
                listed = {
                    (t.name, p.partition_index)
                    for r in dirs.results
                    for t in r.topics
                    for p in t.partitions
                    if t.name in ("dr", "solo")
                }
                hosted = {
                    (name, p)
                    for name, count in (("dr", 1), ("solo", 3))
                    for p in range(count)
                    if node.node_id in image(node).partition(name, p).replicas
                }
                assert listed == hosted
                assert ("solo", stray) not in listed

            # A fail-over does not resurrect the deleted records.
            leader.server.request_shutdown()
            with trio.fail_after(30):
                await leader.server.stopped.wait()
            await wait_image(
                follower,
                lambda img: img.partition("dr", 0).leader not in (-1, leader.node_id),
                "dr-0 led elsewhere",
            )
            successor = by_id[image(follower).partition("dr", 0).leader]
            lookup = ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="dr",
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)
                        ],
                    )
                ],
            )
            with trio.fail_after(20):
                while True:
                    earliest = await call(successor.broker_port, ApiKey.LIST_OFFSETS, 7, lookup)
                    found = earliest.topics[0].partitions[0]
                    if found.error_code == ErrorCode.NONE:
                        break
                    await trio.sleep(0.1)
            assert found.offset == 8


def elect(election_type: int, partitions: dict[str, list[int]] | None) -> ElectLeadersRequest:
    return ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps)
            for t, ps in partitions.items()
        ],
        timeout_ms=20_000,
    )


def outcome(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.topic, p.partition_id): ErrorCode(p.error_code)
        for t in response.replica_election_results
        for p in t.partition_result
    }


async def test_elect_leaders_answers_per_partition(tmp_path: Path) -> None:
    with trio.fail_after(100):
        async with open_cluster(tmp_path, 3) as nodes:
            p1 = nodes[0].broker_port
            await create(p1, "el", 2, 3)
            await wait_in_sync(nodes, "el", 2, 3)

            wanted = {"el": [0, 1, 9], "nope": [0]}
            for version in (0, 1, 2):
                response = await call(p1, ApiKey.ELECT_LEADERS, version, elect(PREFERRED, wanted))
                assert outcome(response) == {
                    ("el", 0): ErrorCode.ELECTION_NOT_NEEDED,
                    ("el", 1): ErrorCode.ELECTION_NOT_NEEDED,
                    ("el", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                }
            # A voter that is not the active controller refuses, so the broker's channel retries.
            idle = next(n for n in nodes if not n.broker.cluster.raft.is_leader)  # type: ignore[union-attr]
            refused = await call(
                idle.controller_port, ApiKey.ELECT_LEADERS, 2, elect(PREFERRED, {"el": [0]})
            )
            assert refused.error_code == ErrorCode.NOT_CONTROLLER
            assert outcome(refused) == {("el", 0): ErrorCode.NOT_CONTROLLER}
            response = await call(p1, ApiKey.ELECT_LEADERS, 2, elect(UNCLEAN, {"el": [0]}))
            assert outcome(response) == {("el", 0): ErrorCode.ELECTION_NOT_NEEDED}
            # All partitions: the ones that needed nothing are left out, every topic is named.
            response = await call(p1, ApiKey.ELECT_LEADERS, 2, elect(PREFERRED, None))
            assert response.error_code == ErrorCode.NONE
            assert outcome(response) == {}
            assert "el" in {t.topic for t in response.replica_election_results}

            # The preferred replica of el-0 goes away: its partitions move, and a preferred
            # election cannot bring leadership back while it is gone.
            first = image(nodes[0]).partition("el", 0).replicas[0]
            gone = next(n for n in nodes if n.node_id == first)
            asker = next(n for n in nodes if n is not gone)
            gone.server.request_shutdown()
            with trio.fail_after(30):
                await gone.server.stopped.wait()
            await wait_image(
                asker, lambda img: img.partition("el", 0).leader not in (-1, first), "el-0 moved"
            )
            response = await call(
                asker.broker_port, ApiKey.ELECT_LEADERS, 2, elect(PREFERRED, {"el": [0]})
            )
            assert outcome(response) == {("el", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
            response = await call(
                asker.broker_port, ApiKey.ELECT_LEADERS, 2, elect(PREFERRED, None)
            )
            assert outcome(response)[("el", 0)] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
