"""Group configs (KIP-848) in a cluster: committed by the controller as ConfigRecords (GROUP),
described by every broker from its image, and applied by whichever broker coordinates the
group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.config_types import ConfigSource
from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    ConsumerGroupHeartbeatRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkapy.testing.local import open_cluster
from tests.server.cluster.test_coordinators_cluster import find, until
from tests.server.helpers import Client

pytestmark = pytest.mark.timeout(150)
GROUP = 32
HEARTBEAT = "consumer.heartbeat.interval.ms"


def _set(group: str, name: str, value: str) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=GROUP, resource_name=group,
        configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=name, config_operation=0, value=value)])])


async def _described(c: Client, group: str) -> tuple[str | None, int]:
    r = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=GROUP, resource_name=group,
                                                       configuration_keys=[HEARTBEAT])]))
    [entry] = r.results[0].configs
    return entry.value, int(entry.config_source)


async def test_a_group_config_set_through_one_broker_is_applied_by_the_groups_coordinator(
    tmp_path: Path,
) -> None:
    group = "cfg-group"
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3) as nodes:
            clients = {n.node_id: await Client.connect(n.broker_port) for n in nodes}
            first = clients[nodes[0].node_id]
            created = await first.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(
                topics=[CreateTopicsRequest.CreatableTopic(name="t", num_partitions=2, replication_factor=3)],
                timeout_ms=20_000))
            assert created.topics[0].error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)

            answer = await first.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _set(group, HEARTBEAT, "9000"))
            assert answer.responses[0].error_code == ErrorCode.NONE
            refused = await first.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _set(group, HEARTBEAT, "1"))
            assert refused.responses[0].error_code == ErrorCode.INVALID_CONFIG
            for node in nodes:
                cluster = node.broker.cluster
                assert cluster is not None
                assert await cluster.publisher.wait_for(
                    lambda image: image.group_configs.get(group, {}).get(HEARTBEAT) == "9000", 10)
            for c in clients.values():
                assert await _described(c, group) == ("9000", ConfigSource.DYNAMIC_GROUP_CONFIG)

            async def coordinator() -> Any:
                found = await find(first, group)
                return found if found.error_code == ErrorCode.NONE else None

            async def joined() -> Any:
                # as a client does: find the coordinator, and again while it is not ready yet
                at = (await until("a coordinator", coordinator)).node_id
                member = await clients[at].request(
                    ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, ConsumerGroupHeartbeatRequest(
                        group_id=group, member_id="m", member_epoch=0, rebalance_timeout_ms=30_000,
                        subscribed_topic_names=["t"], topic_partitions=[]))
                retry = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                         ErrorCode.COORDINATOR_NOT_AVAILABLE)
                return None if member.error_code in retry else member

            member = await until("a heartbeat answered by the coordinator", joined)
            assert (member.error_code, member.heartbeat_interval_ms) == (ErrorCode.NONE, 9000)

            # AlterConfigs replaces the group's whole set (through another broker)
            replace = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
                resource_type=GROUP, resource_name=group,
                configs=[AlterConfigsRequest.AlterableConfig(name="consumer.session.timeout.ms", value="50000")])])
            last = clients[nodes[2].node_id]
            assert (await last.request(ApiKey.ALTER_CONFIGS, 2, replace)).responses[0].error_code == 0
            assert await _described(last, group) == ("5000", ConfigSource.DEFAULT_CONFIG)
