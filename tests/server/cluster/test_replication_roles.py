"""Partition roles from the image: role listeners, wait_replicated for coordinator writes, topic
deletion on every replica, and the diverging-epoch field on the wire."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from kafkapy.protocol import decode_response, encode_response
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.fetch_response import PartitionPart, TopicPart, encode_fetch_response
from kafkapy.protocol.raw_response import FileRegion
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for
from tests.server.helpers import batch

pytestmark = pytest.mark.timeout(120)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, int, int]] = []

    def on_become_leader(self, topic: str, partition: int, leader_epoch: int) -> None:
        self.events.append(("leader", topic, partition, leader_epoch))

    def on_become_follower(self, topic: str, partition: int, leader_epoch: int) -> None:
        self.events.append(("follower", topic, partition, leader_epoch))


async def test_role_listeners_and_wait_replicated(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_cluster(tmp_path, count=2) as (controller, nodes):
            recorders = {i: Recorder() for i in nodes}
            for i, node in nodes.items():
                node.broker.role_listeners.append(recorders[i])
            controller.create_topic("t", rf=2)
            part = controller.image.topics["t"].partitions[0]
            leader, follower = nodes[part.leader], nodes[next(i for i in nodes if i != part.leader)]
            assert recorders[leader.node_id].events == [("leader", "t", 0, part.leader_epoch)]
            assert recorders[follower.node_id].events == [("follower", "t", 0, part.leader_epoch)]
            client = await leader.client()
            answer = await produce(client, "t", batch(b"x", b"y"), acks=1)
            assert answer.error_code == ErrorCode.NONE
            assert await leader.broker.wait_replicated("t", 0, 2, 10_000) == ErrorCode.NONE
            assert await follower.broker.wait_replicated("t", 0, 2, 1_000) == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert await leader.broker.wait_replicated("t", 0, 99, 200) == ErrorCode.REQUEST_TIMED_OUT
            # the follower dies: the controller fences it and moves nothing (it led nothing)
            await follower.stop()
            controller.fence(follower.node_id)
            assert controller.image.topics["t"].partitions[0].isr == (leader.node_id,)
            # the leader adopted the ISR from the image: acks=all commits on its own now
            answer = await produce(client, "t", batch(b"z"), acks=-1, timeout_ms=5_000)
            assert answer.error_code == ErrorCode.NONE
            await client.aclose()


async def test_deleted_topics_leave_every_replica(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("gone", partitions=2, rf=3)
            leader = nodes[controller.image.topics["gone"].partitions[0].leader]
            client = await leader.client()
            assert (await produce(client, "gone", batch(b"x"), acks=-1)).error_code == ErrorCode.NONE
            await client.aclose()
            dirs = [n.broker.logs.get("gone", 0).directory for n in nodes.values()]  # type: ignore[union-attr]
            assert all(d.exists() for d in dirs)
            [result] = controller.commit(controller.ctl.delete_topics(["gone"]))
            assert result.error is ErrorCode.NONE
            for node in nodes.values():
                assert node.broker.topics.get("gone") is None
                assert node.broker.logs.get("gone", 0) is None
                assert node.broker.partition_role("gone", 0) is None
            await wait_for(lambda: not any(d.exists() for d in dirs), what="log directories removed")


def test_diverging_epoch_round_trips_through_the_codec() -> None:
    topic_id = uuid.uuid4()
    parts = [
        PartitionPart(0, high_watermark=5, log_start_offset=0, diverging_epoch=(3, 17)),
        PartitionPart(1, high_watermark=9, log_start_offset=0, records=[b"", FileRegion(-1, 0, 0)]),
    ]
    for version in (12, 13, 15, 17):
        raw = encode_fetch_response(version, [TopicPart("t", topic_id, parts)])
        body = b"".join(s for s in raw.segments if isinstance(s, bytes))
        _, decoded = decode_response(ApiKey.FETCH, version, (1).to_bytes(4, "big") + b"\x00" + body)
        first, second = decoded.responses[0].partitions
        assert (first.diverging_epoch.epoch, first.diverging_epoch.end_offset) == (3, 17)
        assert (second.diverging_epoch.epoch, second.diverging_epoch.end_offset) == (-1, -1)
        assert first.high_watermark == 5
        # and our encoder agrees byte for byte with the generic one on the diverging partition
        generic = encode_response(ApiKey.FETCH, version, 1, decoded)
        assert generic[4 + 1:] == body
