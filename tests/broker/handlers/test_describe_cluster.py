"""DescribeCluster (handlers/describe_cluster.py) on a single node, over the wire.

What admin clients rely on: the cluster id, this node as the controller and the only broker, at
the address the client connected to; an endpoint type the broker listener does not serve is a
clear error code, not a wrong list.
"""

from __future__ import annotations

from pathlib import Path

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DescribeClusterRequest
from tests.server.helpers import Client, running_broker


async def test_this_node_is_the_broker_and_the_controller(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        client = await Client.connect(port)
        for version in (0, 1):
            cluster = await client.request(ApiKey.DESCRIBE_CLUSTER, version, DescribeClusterRequest())
            assert cluster.error_code == ErrorCode.NONE
            assert (cluster.cluster_id, cluster.controller_id) == (broker.cluster_id, 1)
            assert [(b.broker_id, b.host, b.port) for b in cluster.brokers] == [(1, "127.0.0.1", port)]
        await client.aclose()


async def test_an_unknown_endpoint_type_is_refused(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        client = await Client.connect(port)
        cluster = await client.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=7))
        assert (cluster.error_code, cluster.brokers) == (ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, [])
        await client.aclose()
