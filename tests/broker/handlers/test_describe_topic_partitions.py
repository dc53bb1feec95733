"""DescribeTopicPartitions (handlers/describe_topic_partitions.py) on a single node, over the wire.

What admin clients (Kafka 3.8+'s describeTopics) rely on: topics sorted by name, each partition
with its leader, replicas and ISR, pages of at most `response_partition_limit` partitions joined
by a cursor, and an unknown topic answered as UNKNOWN_TOPIC_OR_PARTITION in its own entry.
"""

from __future__ import annotations

from pathlib import Path

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DescribeTopicPartitionsRequest
from tests.server.helpers import Client, create_topic, running_broker

DTP = DescribeTopicPartitionsRequest


async def test_pages_follow_the_cursor(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        client = await Client.connect(port)
        await create_topic(port, "d", 2)
        await create_topic(port, "c", 1)
        first = await client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DTP(
            topics=[DTP.TopicRequest(name="d"), DTP.TopicRequest(name="c")], response_partition_limit=2))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics] == [
            ("c", [0]), ("d", [0])]
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("d", 1)
        [p] = first.topics[0].partitions
        assert (p.leader_id, p.replica_nodes, p.isr_nodes) == (1, [1], [1])
        rest = await client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DTP(
            topics=[DTP.TopicRequest(name="d"), DTP.TopicRequest(name="c")], response_partition_limit=2,
            cursor=DTP.Cursor(topic_name="d", partition_index=1)))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [("d", [1])]
        assert rest.next_cursor is None
        await client.aclose()


async def test_an_unknown_topic_has_its_own_error(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        client = await Client.connect(port)
        resp = await client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DTP(
            topics=[DTP.TopicRequest(name="missing")]))
        assert [(t.name, t.error_code) for t in resp.topics] == [("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        await client.aclose()
