"""Three in-process cluster nodes (kafkapy.testing.local.open_cluster) form one cluster.

What the cluster relies on from the glue: every node starts its parts, joins, and reports ready
only once its broker registration is unfenced; all nodes then agree on the brokers, the
controller and the cluster id they show clients; a topic created through any node is replicated
as the controller assigned it; the nodes stop cleanly. Skipped (naming them) only while cluster
parts are missing from the tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import CreateTopicsRequest, MetadataRequest
from kafkapy.server.cluster.peer import PeerClient
from kafkapy.testing.local import open_cluster

pytestmark = pytest.mark.timeout(120)


async def metadata(port: int, topics: list[str] | None) -> object:
    client = PeerClient("127.0.0.1", port, client_id="node-test")
    try:
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        return await client.request(ApiKey.METADATA, 12, request, timeout_s=10)
    finally:
        await client.aclose()


async def test_three_nodes_agree_and_replicate_a_topic(tmp_path: Path) -> None:
    async with open_cluster(tmp_path, 3) as nodes:
        assert all(node.broker.cluster is not None and node.broker.cluster.is_ready() for node in nodes)
        assert len({node.broker.cluster_id for node in nodes}) == 1
        views = [await metadata(node.broker_port, None) for node in nodes]
        for view in views:
            assert sorted(b.node_id for b in view.brokers) == [1, 2, 3]  # type: ignore[attr-defined]
            assert view.cluster_id == nodes[0].broker.cluster_id  # type: ignore[attr-defined]
        controllers = {view.controller_id for view in views}  # type: ignore[attr-defined]
        assert len(controllers) == 1
        assert controllers <= {1, 2, 3}

        client = PeerClient("127.0.0.1", nodes[1].broker_port, client_id="node-test")
        create = CreateTopicsRequest(timeout_ms=20_000, topics=[
            CreateTopicsRequest.CreatableTopic(name="replicated", num_partitions=3, replication_factor=3)])
        response = await client.request(ApiKey.CREATE_TOPICS, 5, create, timeout_s=30)
        await client.aclose()
        assert response.topics[0].error_code == ErrorCode.NONE, response.topics[0].error_message

        with trio.fail_after(30):
            while True:
                view = await metadata(nodes[2].broker_port, ["replicated"])
                topic = view.topics[0]  # type: ignore[attr-defined]
                if topic.error_code == 0 and len(topic.partitions) == 3 and all(
                    len(p.isr_nodes) == 3 and p.leader_id in (1, 2, 3) for p in topic.partitions
                ):
                    break
                await trio.sleep(0.1)
        for p in topic.partitions:
            assert sorted(p.replica_nodes) == [1, 2, 3]
