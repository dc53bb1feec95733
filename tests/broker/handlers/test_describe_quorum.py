"""DescribeQuorum on a broker listener (handlers/describe_quorum.py), single node, over the wire.

What `kafka-metadata-quorum.sh --bootstrap-server` relies on: the metadata partition's leader and
voters, with the node's endpoint; another partition than `__cluster_metadata-0` is
INVALID_REQUEST, not a crash.
"""

from __future__ import annotations

from pathlib import Path

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DescribeQuorumRequest
from tests.server.helpers import Client, running_broker

DQ = DescribeQuorumRequest


def _request(topic: str, partition: int) -> DescribeQuorumRequest:
    return DQ(topics=[DQ.TopicData(topic_name=topic, partitions=[DQ.PartitionData(partition_index=partition)])])


async def test_a_single_node_leads_its_quorum_of_one(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        client = await Client.connect(port)
        resp = await client.request(ApiKey.DESCRIBE_QUORUM, 2, _request("__cluster_metadata", 0))
        assert resp.error_code == ErrorCode.NONE
        [topic] = resp.topics
        [part] = topic.partitions
        assert (topic.topic_name, part.leader_id, [v.replica_id for v in part.current_voters]) == (
            "__cluster_metadata", 1, [1])
        # v2 names the voters' controller listeners: a quorum of one started without one has none
        assert [(n.node_id, n.listeners) for n in resp.nodes] in ([], [(1, [])])
        await client.aclose()


async def test_another_partition_is_an_invalid_request(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        client = await Client.connect(port)
        resp = await client.request(ApiKey.DESCRIBE_QUORUM, 2, _request("__cluster_metadata", 1))
        assert resp.error_code == ErrorCode.INVALID_REQUEST
        await client.aclose()
