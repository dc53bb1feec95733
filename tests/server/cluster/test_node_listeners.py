"""Cluster mode binds the controller listener and serves it from the controller registry.

What the cluster relies on: Raft and broker-to-controller RPCs reach the controller listener,
which advertises only its own APIs (a client that lands there by mistake is not offered Produce);
broker listeners answer exactly as before; a single node never binds the controller listener
(Kafka's single-node file names a fixed CONTROLLER port that must not clash).
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from kafkapy.broker.config import BrokerConfig
from kafkapy.broker.metadata_store import cluster_id_for
from kafkapy.protocol import ApiKey, RequestHeader, decode_response, encode_request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ApiVersionsRequest, MetadataRequest
from kafkapy.server.app import BoundListener, Server
from kafkapy.server.broker import Broker
from kafkapy.server.cluster.node import ClusterNode
from kafkapy.server.cluster.peer import PeerClient, PeerError
from kafkapy.testing.cluster import free_ports
from tests.server.helpers import build_node

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def serving(settings: dict[str, str]) -> AsyncIterator[tuple[Broker, Server, list[BoundListener]]]:
    server = build_node(None, settings)
    broker = server.broker
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.run)
        try:
            yield broker, server, bound
        finally:
            server.request_shutdown()
            with trio.fail_after(15):
                await server.stopped.wait()


CLUSTER = {
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    "offsets.topic.num.partitions": "1",
}


async def _api_keys(port: int) -> set[int]:
    client = PeerClient("127.0.0.1", port, client_id="listener-test")
    try:
        response = await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)
    finally:
        await client.aclose()
    assert response.error_code == ErrorCode.NONE
    return {k.api_key for k in response.api_keys}


async def test_cluster_mode_binds_and_routes_the_controller_listener() -> None:
    async with serving(CLUSTER) as (broker, server, bound):
        assert [b.listener.name for b in bound] == ["PLAINTEXT", "CONTROLLER"]
        assert isinstance(server.cluster, ClusterNode)
        assert broker.cluster is server.cluster
        broker_port, controller_port = bound[0].port, bound[1].port
        on_broker = await _api_keys(broker_port)
        on_controller = await _api_keys(controller_port)
        assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS} <= on_broker
        assert ApiKey.API_VERSIONS in on_controller
        assert ApiKey.PRODUCE not in on_controller
        assert ApiKey.METADATA not in on_controller
        # a broker API on the controller listener: the connection is closed, as Kafka does
        client = PeerClient("127.0.0.1", controller_port, client_id="listener-test")
        with pytest.raises(PeerError, match="closed"):
            await client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]), timeout_s=10)
        await client.aclose()


async def test_controller_listener_answers_a_too_new_api_versions_with_its_own_list() -> None:
    async with serving(CLUSTER) as (_broker, _server, bound):
        with trio.fail_after(10):
            stream = await trio.open_tcp_stream("127.0.0.1", bound[1].port)
            frame = encode_request(RequestHeader(ApiKey.API_VERSIONS, 3, 7, "x"), ApiVersionsRequest())
            frame = frame[:2] + struct.pack(">h", 99) + frame[4:]  # claim v99
            await stream.send_all(struct.pack(">i", len(frame)) + frame)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
                chunk = await stream.receive_some(65536)
                assert chunk, "connection closed instead of an UNSUPPORTED_VERSION answer"
                data += chunk
            await stream.aclose()
        corr, response = decode_response(ApiKey.API_VERSIONS, 0, data[4:])
        assert corr == 7
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        keys = {k.api_key for k in response.api_keys}
        assert ApiKey.API_VERSIONS in keys
        assert ApiKey.PRODUCE not in keys


async def test_cluster_id_is_shared_by_every_member() -> None:
    async with serving(CLUSTER) as (broker, _server, _bound):
        other = BrokerConfig({**CLUSTER, "node.id": "2"}).cluster
        assert other is not None
        assert broker.cluster_id == cluster_id_for(other)
        assert len(broker.cluster_id) == 22


async def test_a_quorum_of_one_serves_the_controller_listener_it_is_given() -> None:
    """A lone node is a quorum of one; a CONTROLLER listener in its `listeners` is its voter's
    (the quorum tools reach it there), and it serves clients without one as well."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "offsets.topic.num.partitions": "1",
    }
    async with serving(settings) as (broker, server, bound):
        assert [b.listener.name for b in bound] == ["PLAINTEXT", "CONTROLLER"]
        assert server.cluster.config.quorum_of_one
        assert broker.cluster is server.cluster
        assert await server.wait_ready()
        assert ApiKey.PRODUCE in await _api_keys(bound[0].port)
        on_controller = await _api_keys(bound[1].port)
        assert ApiKey.DESCRIBE_QUORUM in on_controller
        assert ApiKey.PRODUCE not in on_controller
    async with serving({"listeners": "PLAINTEXT://127.0.0.1:0"}) as (broker, server, bound):
        assert [b.listener.name for b in bound] == ["PLAINTEXT"]
        assert await server.wait_ready()
        assert ApiKey.PRODUCE in await _api_keys(bound[0].port)


async def test_controller_listener_lists_the_same_features_as_the_broker_listener() -> None:
    """`kafka-features.sh --bootstrap-controller` asks the controller listener: it answers the
    finalized levels and supported ranges the broker listeners give."""

    async def features(port: int) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        client = PeerClient("127.0.0.1", port, client_id="listener-test")
        try:
            with trio.fail_after(30):
                while True:
                    r = await client.request(ApiKey.API_VERSIONS, 4, ApiVersionsRequest(), timeout_s=10)
                    if r.finalized_features:
                        break
                    await trio.sleep(0.05)
        finally:
            await client.aclose()
        assert r.finalized_features_epoch >= 0
        return (
            {f.name: f.max_version_level for f in r.finalized_features},
            {f.name: (f.min_version, f.max_version) for f in r.supported_features},
        )

    (port,) = free_ports(1)
    sole_voter = {
        **CLUSTER,
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
    }
    async with serving(sole_voter) as (_broker, _server, bound):
        on_controller = await features(bound[1].port)
        assert on_controller == await features(bound[0].port)
        assert on_controller[0]["metadata.version"] == 25
