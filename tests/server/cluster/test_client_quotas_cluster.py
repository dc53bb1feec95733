"""Client quotas in a three-node cluster: altered through any broker (forwarded to the active
controller), described by every broker from its own image, and enforced by every broker."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    MetadataRequest,
)
from kafkapy.testing.local import open_cluster
from tests.server.cluster.test_coordinators_cluster import until
from tests.server.helpers import Client

pytestmark = pytest.mark.timeout(150)


def _alter(client_id: str, key: str, value: float) -> AlterClientQuotasRequest:
    return AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(
        entity=[AlterClientQuotasRequest.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[AlterClientQuotasRequest.OpData(key=key, value=value)])])


async def _described(c: Client) -> dict[str, dict[str, float]]:
    r = await c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, DescribeClientQuotasRequest(components=[
        DescribeClientQuotasRequest.ComponentData(entity_type="client-id", match_type=2, match=None)]))
    assert r.error_code == ErrorCode.NONE
    return {item.entity[0].entity_name: {v.key: v.value for v in item.values} for item in r.entries or []}


async def test_a_quota_set_through_one_broker_is_described_and_enforced_by_all(tmp_path: Path) -> None:
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3) as nodes:
            clients = [await Client.connect(n.broker_port) for n in nodes]
            # through the last node (whichever is the active controller, it forwards or runs it)
            answer = await clients[-1].request(ApiKey.ALTER_CLIENT_QUOTAS, 1, _alter("busy", "request_percentage", 1e-9))
            assert answer.entries[0].error_code == ErrorCode.NONE
            refused = await clients[-1].request(ApiKey.ALTER_CLIENT_QUOTAS, 1, _alter("busy", "request_percentage", -1.0))
            assert refused.entries[0].error_code == ErrorCode.INVALID_REQUEST
            for c in clients:
                await until("every broker describes the quota", lambda c=c: _has_quota(c))
            for node, c in zip(nodes, clients, strict=True):
                assert node.broker.quotas.quota("request_percentage", "ANONYMOUS", "busy") == 1e-9
                await c.send(ApiKey.METADATA, 9, MetadataRequest(topics=[]), client_id="busy")
                _, metadata = await c.receive()
                assert metadata.throttle_time_ms == 1000, node.node_id  # Kafka's cap: one window


async def _has_quota(c: Client) -> bool:
    return (await _described(c)).get("busy") == {"request_percentage": 1e-9}
