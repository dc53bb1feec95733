"""Topic administration in a 3-node cluster goes through the active controller.

What clients rely on: a CreateTopics / CreatePartitions / config change / DeleteTopics sent to
any broker is decided once by the controller (placement over all brokers, validation), and the
broker that answered already shows the result in its own Metadata / DescribeConfigs - no
polling - while the other brokers follow from the metadata log.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from kafkapy.server.cluster.peer import PeerClient
from kafkapy.testing.local import open_cluster

pytestmark = pytest.mark.timeout(120)

TOPIC = 2


async def call(port: int, api: ApiKey, version: int, body: Any) -> Any:
    client = PeerClient("127.0.0.1", port, client_id="controller-test")
    try:
        return await client.request(api, version, body, timeout_s=30)
    finally:
        await client.aclose()


async def metadata(port: int, topic: str) -> Any:
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    response = await call(port, ApiKey.METADATA, 12, request)
    return response.topics[0]


def creatable(name: str, partitions: int, rf: int, **configs: str) -> Any:
    return CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k.replace("_", "."), value=v)
            for k, v in configs.items()
        ],
    )


async def create(port: int, *topics: Any, validate_only: bool = False) -> list[Any]:
    request = CreateTopicsRequest(topics=list(topics), timeout_ms=20_000, validate_only=validate_only)
    response = await call(port, ApiKey.CREATE_TOPICS, 7, request)
    return list(response.topics)


async def describe_topic(port: int, topic: str) -> dict[str, tuple[str | None, int]]:
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC, resource_name=topic)]
    )
    response = await call(port, ApiKey.DESCRIBE_CONFIGS, 4, request)
    result = response.results[0]
    assert result.error_code == ErrorCode.NONE
    return {c.name: (c.value, c.config_source) for c in result.configs}


async def test_admin_requests_are_decided_by_the_controller_and_visible_at_once(tmp_path: Path) -> None:
    with trio.fail_after(100):
        async with open_cluster(tmp_path, 3) as nodes:
            p1, p2, p3 = (n.broker_port for n in nodes)

            [res] = await create(p2, creatable("orders", 3, 3, retention_ms="86400000"))
            assert res.error_code == ErrorCode.NONE, res.error_message
            assert res.topic_id != uuid.UUID(int=0)
            assert (res.num_partitions, res.replication_factor) == (3, 3)
            assert ("retention.ms", "86400000") in {(c.name, c.value) for c in res.configs}
            # The answering broker already knows the topic: no retry loop here.
            topic = await metadata(p2, "orders")
            assert topic.error_code == ErrorCode.NONE
            assert topic.topic_id == res.topic_id
            assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
            for p in topic.partitions:
                assert sorted(p.replica_nodes) == [1, 2, 3]
                assert p.leader_id == p.replica_nodes[0]
            assert {p.leader_id for p in topic.partitions} == {1, 2, 3}  # leaders spread out

            errors = await create(
                p1,
                creatable("orders", 1, 1),
                creatable("too-wide", 1, 4),
                creatable("bad name", 1, 1),
                creatable("bad-config", 1, 1, no_such_config="1"),
            )
            assert [r.error_code for r in errors] == [
                ErrorCode.TOPIC_ALREADY_EXISTS,
                ErrorCode.INVALID_REPLICATION_FACTOR,
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                ErrorCode.INVALID_CONFIG,
            ]
            [checked] = await create(p1, creatable("dry-run", 2, 2), validate_only=True)
            assert checked.error_code == ErrorCode.NONE
            assert (await metadata(p1, "dry-run")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

            grow = CreatePartitionsRequest(
                topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="orders", count=5)],
                timeout_ms=20_000,
            )
            grown = await call(p3, ApiKey.CREATE_PARTITIONS, 3, grow)
            assert grown.results[0].error_code == ErrorCode.NONE, grown.results[0].error_message
            assert len((await metadata(p3, "orders")).partitions) == 5
            shrink = CreatePartitionsRequest(
                topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="orders", count=2)],
                timeout_ms=20_000,
            )
            shrunk = await call(p3, ApiKey.CREATE_PARTITIONS, 3, shrink)
            assert shrunk.results[0].error_code == ErrorCode.INVALID_PARTITIONS

            alter = IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=TOPIC,
                        resource_name="orders",
                        configs=[
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name="retention.ms", config_operation=0, value="1234"
                            ),
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name="cleanup.policy", config_operation=2, value="compact"
                            ),
                        ],
                    ),
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=TOPIC,
                        resource_name="orders",
                        configs=[
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name="segment.bytes", config_operation=0, value="not-a-number"
                            )
                        ],
                    ),
                ]
            )
            altered = await call(p1, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)
            assert [r.error_code for r in altered.responses] == [
                ErrorCode.NONE,
                ErrorCode.INVALID_CONFIG,
            ]
            configs = await describe_topic(p1, "orders")
            assert configs["retention.ms"][0] == "1234"
            assert configs["cleanup.policy"][0] == "delete,compact"

            # AlterConfigs replaces the whole override set.
            replace = AlterConfigsRequest(
                resources=[
                    AlterConfigsRequest.AlterConfigsResource(
                        resource_type=TOPIC,
                        resource_name="orders",
                        configs=[AlterConfigsRequest.AlterableConfig(name="segment.ms", value="60000")],
                    )
                ]
            )
            replaced = await call(p2, ApiKey.ALTER_CONFIGS, 2, replace)
            assert replaced.responses[0].error_code == ErrorCode.NONE
            configs = await describe_topic(p2, "orders")
            assert configs["segment.ms"][0] == "60000"
            assert configs["retention.ms"][0] != "1234"
            assert configs["cleanup.policy"][0] == "delete"

            delete = DeleteTopicsRequest(topic_names=["orders", "missing"], timeout_ms=20_000)
            deleted = await call(p3, ApiKey.DELETE_TOPICS, 5, delete)
            assert [(r.name, r.error_code) for r in deleted.responses] == [
                ("orders", ErrorCode.NONE),
                ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ]
            assert (await metadata(p3, "orders")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # The other brokers follow the log.
            publisher = nodes[0].broker.cluster.publisher  # type: ignore[union-attr]
            assert await publisher.wait_for(lambda image: "orders" not in image.topics, 10)
            assert (await metadata(p1, "orders")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_alter_configs_through_a_lagging_broker_replaces_every_override(tmp_path: Path) -> None:
    """AlterConfigs replaces the whole override set even when the broker it is sent to has not
    yet applied a change another broker just committed (its publisher lags by a publish):
    the replace must not depend on that broker's image."""
    with trio.fail_after(100):
        async with open_cluster(tmp_path, 3) as nodes:
            p1, p2 = nodes[0].broker_port, nodes[1].broker_port
            [res] = await create(p1, creatable("replaced", 1, 3))
            assert res.error_code == ErrorCode.NONE, res.error_message
            lagging = nodes[1].broker.cluster
            assert lagging is not None
            assert await lagging.publisher.wait_for(lambda image: "replaced" in image.topics, 10)
            before = lagging.image

            compact = IncrementalAlterConfigsRequest(resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=TOPIC, resource_name="replaced",
                    configs=[IncrementalAlterConfigsRequest.AlterableConfig(
                        name="cleanup.policy", config_operation=0, value="compact")],
                )
            ])
            altered = await call(p1, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, compact)
            assert altered.responses[0].error_code == ErrorCode.NONE
            assert await lagging.publisher.wait_for(
                lambda image: image.topics["replaced"].configs.get("cleanup.policy") == "compact", 10
            )
            lagging.publisher.image = before  # as if its publisher had not applied that change yet

            replace = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
                resource_type=TOPIC, resource_name="replaced",
                configs=[AlterConfigsRequest.AlterableConfig(name="segment.ms", value="60000")],
            )])
            replaced = await call(p2, ApiKey.ALTER_CONFIGS, 2, replace)
            assert replaced.responses[0].error_code == ErrorCode.NONE
            # the answering broker shows the result at once, the others once they applied it
            configs = await describe_topic(p2, "replaced")
            assert configs["segment.ms"][0] == "60000"
            assert configs["cleanup.policy"][0] == "delete"
            first = nodes[0].broker.cluster
            assert first is not None
            assert await first.publisher.wait_for(
                lambda image: image.topics["replaced"].configs == {"segment.ms": "60000"}, 10
            )
