"""Dynamic broker configs in a cluster: kept in the metadata log (ConfigRecord, BROKER), taken
by every broker from its image - the default log config of its partitions, and the values and
sources DescribeConfigs reports."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from kafkapy.broker.config import ConfigSource
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafkapy.testing.local import open_cluster
from tests.server.cluster.test_controller_admin import call, creatable, create

pytestmark = pytest.mark.timeout(120)
BROKER = 4


def _set(resource: str, name: str, value: str) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER, resource_name=resource,
        configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=name, config_operation=0, value=value)])])


async def test_cluster_default_and_per_broker_values_reach_every_broker(tmp_path: Path) -> None:
    with trio.fail_after(100):
        async with open_cluster(tmp_path, 3) as nodes:
            p1 = nodes[0].broker_port
            [res] = await create(p1, creatable("dyn", 1, 3))
            assert res.error_code == ErrorCode.NONE, res.error_message
            answer = await call(p1, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _set("", "log.retention.ms", "7200000"))
            assert answer.responses[0].error_code == ErrorCode.NONE
            third = nodes[2].broker
            third_id = str(third.node_id)
            answer = await call(p1, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _set(third_id, "log.segment.bytes", "1048576"))
            assert answer.responses[0].error_code == ErrorCode.NONE
            refused = await call(p1, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _set("", "num.io.threads", "4"))
            assert refused.responses[0].error_code == ErrorCode.INVALID_REQUEST
            for node in nodes:
                cluster = node.broker.cluster
                assert cluster is not None
                assert await cluster.publisher.wait_for(
                    lambda image: image.broker_configs.get(third_id, {}).get("log.segment.bytes") == "1048576", 10)
            for _ in range(100):  # the replica logs exist once each broker applied the topic
                plogs = [n.broker.partition_log("dyn", 0) for n in nodes]
                if all(plogs):
                    break
                await trio.sleep(0.05)
            assert [p.config.retention_ms for p in plogs if p is not None] == [7_200_000] * 3
            assert [p.config.segment_bytes for p in plogs if p is not None] == [1 << 30, 1 << 30, 1 << 20]
            described = await call(nodes[2].broker_port, ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(
                include_synonyms=True, resources=[DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=BROKER, resource_name=third_id,
                    configuration_keys=["log.retention.ms", "log.segment.bytes"])]))
            entries = {c.name: (c.value, c.config_source) for c in described.results[0].configs}
            assert entries == {
                "log.retention.ms": ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                "log.segment.bytes": ("1048576", ConfigSource.DYNAMIC_BROKER_CONFIG),
            }


BROKER_LOGGER = 8
Op = IncrementalAlterConfigsRequest.AlterableConfig
Resource = IncrementalAlterConfigsRequest.AlterConfigsResource


async def test_list_configs_take_append_and_subtract_and_loggers_stay_with_their_broker(
    tmp_path: Path,
) -> None:
    logger = logging.getLogger("kafkapy.server.broker")
    level = logger.level
    try:
        await _append_subtract_and_loggers(tmp_path, logger)
    finally:
        logger.setLevel(level)


async def _append_subtract_and_loggers(tmp_path: Path, logger: logging.Logger) -> None:
    with trio.fail_after(100):
        async with open_cluster(tmp_path, 3) as nodes:
            second = nodes[1]
            port, node_id = second.broker_port, str(second.broker.node_id)
            [res] = await create(port, creatable("pol", 1, 3))
            assert res.error_code == ErrorCode.NONE, res.error_message
            answer = await call(port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(resources=[
                Resource(resource_type=BROKER, resource_name="",
                         configs=[Op(name="log.cleanup.policy", config_operation=2, value="compact")]),
                Resource(resource_type=BROKER_LOGGER, resource_name=node_id,
                         configs=[Op(name="kafkapy.server.broker", config_operation=0, value="DEBUG")]),
                Resource(resource_type=BROKER, resource_name="",
                         configs=[Op(name="log.retention.ms", config_operation=2, value="1")]),
                Resource(resource_type=BROKER_LOGGER, resource_name=str(nodes[0].broker.node_id),
                         configs=[Op(name="kafkapy.server.broker", config_operation=0, value="INFO")]),
            ]))
            assert [(r.resource_type, r.error_code) for r in answer.responses] == [
                (BROKER, ErrorCode.NONE), (BROKER_LOGGER, ErrorCode.NONE),
                (BROKER, ErrorCode.INVALID_CONFIG), (BROKER_LOGGER, ErrorCode.INVALID_REQUEST),
            ]
            assert logger.level == logging.DEBUG
            for node in nodes:
                cluster = node.broker.cluster
                assert cluster is not None
                assert await cluster.publisher.wait_for(
                    lambda image: image.broker_configs.get("", {}).get("log.cleanup.policy") == "delete,compact", 10)
            subtract = await call(nodes[2].broker_port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(
                resources=[Resource(resource_type=BROKER, resource_name="",
                                    configs=[Op(name="log.cleanup.policy", config_operation=3, value="delete")])]))
            assert subtract.responses[0].error_code == ErrorCode.NONE
            for node in nodes:
                cluster = node.broker.cluster
                assert cluster is not None
                assert await cluster.publisher.wait_for(
                    lambda image: image.broker_configs.get("", {}).get("log.cleanup.policy") == "compact", 10)
                for _ in range(100):  # the replica log exists once the broker applied the topic
                    plog = node.broker.partition_log("pol", 0)
                    if plog is not None:
                        break
                    await trio.sleep(0.05)
                assert plog is not None
                assert (plog.config.compact, plog.config.delete) == (True, False)
