"""Helpers for tests against the controller of an in-process cluster (`kafkapy.testing.local`):
calls over the wire, the active controller, a replicated topic, a node's metadata image."""

from __future__ import annotations

from typing import Any

import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import CreateTopicsRequest
from kafkapy.server.cluster.peer import PeerClient
from kafkapy.testing.local import LocalNode

__all__ = ["active_controller", "call", "create_replicated", "image_of", "wait_until"]


async def call(port: int, api: ApiKey, version: int, body: Any) -> Any:
    client = PeerClient("127.0.0.1", port, client_id="controller-test")
    try:
        return await client.request(api, version, body, timeout_s=30)
    finally:
        await client.aclose()


def active_controller(nodes: list[LocalNode]) -> LocalNode:
    active = [n for n in nodes if n.broker.cluster is not None and n.broker.cluster.controller.active()]
    assert len(active) == 1, [n.node_id for n in active]
    return active[0]


async def wait_until(what: str, check: Any, timeout_s: float = 30) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if check():
            return
        await trio.sleep(0.05)
    raise AssertionError(f"never: {what}")


async def create_replicated(port: int, name: str, partitions: int) -> None:
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=3
            )
        ],
        timeout_ms=20_000,
    )
    response = await call(port, ApiKey.CREATE_TOPICS, 7, request)
    assert response.topics[0].error_code == ErrorCode.NONE, response.topics[0].error_message


def image_of(node: LocalNode) -> Any:
    assert node.broker.cluster is not None
    return node.broker.cluster.image
